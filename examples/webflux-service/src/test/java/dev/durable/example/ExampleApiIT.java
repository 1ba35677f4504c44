package dev.durable.example;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.test.web.reactive.server.WebTestClient;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/**
 * The example service over HTTP, on the embedded PostgreSQL (its own schema): inserts, workflows
 * and signals, cancel and retry, the typed errors' statuses, the dashboard's mount, the SSE stream
 * and the health endpoint.
 */
class ExampleApiIT {

    private static final Duration SETTLE = Duration.ofSeconds(30);

    private static RunningExample app;
    private static WebTestClient http;
    private static DurableEngine engine;

    @BeforeAll
    static void start() {
        app = RunningExample.start("durable.schema=example_api_it", "example.events.heartbeat=1s",
                "management.endpoint.health.show-details=always");
        http = app.client();
        engine = app.bean(DurableEngine.class);
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    private long insert(String path, Map<String, Object> body) {
        Map<?, ?> inserted = http.post().uri(path).bodyValue(body).exchange()
                .expectStatus().isCreated()
                .expectBody(Map.class).returnResult().getResponseBody();
        return ((Number) inserted.get("id")).longValue();
    }

    private Instance settled(long id) {
        return engine.awaitSettled(id, SETTLE).block();
    }

    @Test
    void insertsAJobThatRunsToDone() {
        long id = insert("/api/jobs", Map.of("type", "greet", "args", "ada"));
        assertThat(settled(id).resultJson()).isEqualTo("\"hello ada\"");
        http.get().uri("/api/instances/{id}", id).exchange().expectStatus().isOk()
                .expectBody().jsonPath("$.status").isEqualTo("DONE");
    }

    @Test
    void aWorkflowAwaitsItsSignalByCorrelationKey() {
        long id = insert("/api/workflows", Map.of("type", "order", "state", Map.of("item", "book"),
                "correlationKey", "order-42"));
        assertThat(engine.awaitSettledOrParked(id, SETTLE).block().status()).isEqualTo(InstanceStatus.AWAITING_SIGNAL);
        http.post().uri("/api/correlations/order-42/signals/paid").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(Map.of("amount", 12)).exchange()
                .expectStatus().isOk().expectBody().jsonPath("$.result").isEqualTo("DELIVERED");
        Instance done = settled(id);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).contains("shipped");
    }

    @Test
    void signalsByIdAndCancels() {
        long id = insert("/api/workflows", Map.of("type", "order", "state", Map.of("item", "pen")));
        engine.awaitSettledOrParked(id, SETTLE).block();
        http.post().uri("/api/instances/{id}/signals/noise?dedupKey=n1", id).exchange()
                .expectStatus().isOk().expectBody().jsonPath("$.result").isEqualTo("DELIVERED");
        http.post().uri("/api/instances/{id}/signals/noise?dedupKey=n1", id).exchange()
                .expectStatus().isOk().expectBody().jsonPath("$.result").isEqualTo("DUPLICATE");
        http.post().uri("/api/instances/{id}/cancel", id).exchange()
                .expectStatus().isOk().expectBody().jsonPath("$.result").isEqualTo("CANCELLED");
        assertThat(settled(id).status()).isEqualTo(InstanceStatus.CANCELLED);
    }

    @Test
    void retryRunsAFailedInstanceAgainInPlace() {
        long id = insert("/api/jobs", Map.of("type", "flaky", "args", "disk full", "priority", 3));
        Instance failed = settled(id);
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.lastError()).contains("flaky: disk full");

        http.post().uri("/api/instances/{id}/retry", id).exchange().expectStatus().isOk()
                .expectBody().jsonPath("$.id").isEqualTo(id);
        // The same instance runs again (flaky fails again, after a fresh budget of attempts).
        Instance again = settled(id);
        assertThat(again.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(again.priority()).isEqualTo(3);
        assertThat(again.stateJson()).isEqualTo("\"disk full\"");

        long done = insert("/api/jobs", Map.of("type", "greet", "args", "bob"));
        settled(done);
        http.post().uri("/api/instances/{id}/retry", done).exchange().expectStatus().isEqualTo(409);
    }

    @Test
    void typedErrorsBecomeStatuses() {
        http.post().uri("/api/jobs").bodyValue(Map.of("type", "no-such-type")).exchange()
                .expectStatus().isBadRequest().expectBody().jsonPath("$.detail").value(detail ->
                        assertThat((String) detail).contains("no-such-type"));
        http.post().uri("/api/jobs").bodyValue(Map.of("type", "greet", "args", "x", "maxAttempts", 0)).exchange()
                .expectStatus().isBadRequest();
        insert("/api/jobs", Map.of("type", "greet", "args", "x", "correlationKey", "once", "runInSeconds", 3600));
        http.post().uri("/api/jobs").bodyValue(Map.of("type", "greet", "args", "x", "correlationKey", "once"))
                .exchange().expectStatus().isEqualTo(409);
        http.post().uri("/api/instances/999999999/signals/paid").exchange().expectStatus().isNotFound();
        http.post().uri("/api/correlations/nobody/signals/paid").exchange().expectStatus().isNotFound();
        http.post().uri("/api/instances/999999999/cancel").exchange().expectStatus().isNotFound();
        http.post().uri("/api/instances/999999999/retry").exchange().expectStatus().isNotFound();
    }

    @Test
    void aKeyTooLongInBytesIsABadRequestAndTheQueueRunsOn() {
        // The repro: 1,024 CJK characters (3,072 bytes) used to stop queue 'default' until cancelled.
        String key = "\u6f22".repeat(1024);
        http.post().uri("/api/jobs").bodyValue(Map.of("type", "greet", "args", "x", "concurrencyKey", key))
                .exchange().expectStatus().isBadRequest().expectBody().jsonPath("$.detail").value(detail ->
                        assertThat((String) detail).contains("at most 1024 bytes in UTF-8, was 3072 bytes"));
        long id = insert("/api/jobs", Map.of("type", "greet", "args", "after"));
        assertThat(settled(id).status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void unknownIdsSayWhatWasAsked() {
        http.get().uri("/api/instances/999999999").exchange().expectStatus().isNotFound()
                .expectBody().jsonPath("$.detail").isEqualTo("no instance with id 999999999");
        http.post().uri("/api/instances/999999999/cancel").exchange().expectStatus().isNotFound()
                .expectBody().jsonPath("$.detail").isEqualTo("no instance with id 999999999 to cancel");
        http.post().uri("/api/instances/999999999/signals/paid").exchange().expectStatus().isNotFound()
                .expectBody().jsonPath("$.detail").isEqualTo("no live instance with id 999999999 to signal");
    }

    @Test
    void malformedJsonIsAProblemDetail() {
        http.post().uri("/api/jobs").contentType(MediaType.APPLICATION_JSON).bodyValue("{\"type\": \"greet\", ")
                .exchange().expectStatus().isBadRequest()
                .expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_PROBLEM_JSON)
                .expectBody().jsonPath("$.status").isEqualTo(400).jsonPath("$.detail").exists();
        // Arguments of the wrong shape for the job's type are refused at insert, naming the type.
        http.post().uri("/api/workflows").bodyValue(Map.of("type", "order", "state", List.of("not", "an", "order")))
                .exchange().expectStatus().isBadRequest()
                .expectBody().jsonPath("$.detail").value(detail -> assertThat((String) detail)
                        .contains("arguments of type 'order' do not fit"));
    }

    @Test
    void eventsStreamAsServerSentEventsWithHeartbeats() {
        Flux<ServerSentEvent<Map<String, Object>>> stream = http.get().uri("/api/events?type=greet")
                .accept(MediaType.TEXT_EVENT_STREAM).exchange().expectStatus().isOk()
                .returnResult(new ParameterizedTypeReference<ServerSentEvent<Map<String, Object>>>() { })
                .getResponseBody();
        long[] id = new long[1];
        StepVerifier.create(stream)
                .expectNextMatches(first -> "connected".equals(first.comment()))
                .then(() -> id[0] = insert("/api/jobs", Map.of("type", "greet", "args", "sse")))
                .thenConsumeWhile(event -> !(event.data() != null && "COMPLETED".equals(event.data().get("kind"))
                        && ((Number) event.data().get("id")).longValue() == id[0]))
                .expectNextCount(0)
                .thenCancel()
                .verify(SETTLE);
        // Heartbeats: with the 1 s interval of this test, an idle stream still sends comments.
        StepVerifier.create(http.get().uri("/api/events?type=nothing-happens").accept(MediaType.TEXT_EVENT_STREAM)
                        .exchange().returnResult(new ParameterizedTypeReference<ServerSentEvent<String>>() { })
                        .getResponseBody().skip(1).take(2))
                .expectNextMatches(event -> "heartbeat".equals(event.comment()))
                .expectNextMatches(event -> "heartbeat".equals(event.comment()))
                .verifyComplete();
    }

    @Test
    void healthShowsTheEngineUp() {
        http.get().uri("/actuator/health").exchange().expectStatus().isOk()
                .expectBody().jsonPath("$.components.durable.status").isEqualTo("UP")
                .jsonPath("$.components.durable.details.schema").isEqualTo("example_api_it");
    }

    @Test
    void theDashboardModuleIsMountedAtDurable() {
        http.get().uri("/").exchange().expectStatus().isSeeOther().expectHeader().location("/durable/");
        http.get().uri("/durable/").exchange().expectStatus().isOk().expectBody(String.class)
                .value(page -> assertThat(page).contains("Durable example").contains("/durable/static/dashboard.js")
                        .contains("data-queue=\"orders\""));
    }
}
