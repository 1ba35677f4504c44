package dev.durable.example;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.test.web.reactive.server.WebTestClient;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/**
 * The example as it starts with no settings: on 127.0.0.1, health without details, no metrics
 * endpoint, cross-site POSTs refused, and event streams that end as the application closes (so a
 * Ctrl-C under spring-boot:run stops it well within the 5 s before the plugin kills it).
 */
class ExampleAccessIT {

    @Test
    void itStartsLocalAndClosedAndEndsItsStreamsOnClose() {
        RunningExample app = RunningExample.start("durable.schema=example_access_it");
        try {
            WebTestClient http = app.client();
            assertThat(app.context().getEnvironment().getProperty("server.address")).isEqualTo("127.0.0.1");

            http.get().uri("/actuator/health").exchange().expectStatus().isOk()
                    .expectBody().jsonPath("$.status").isEqualTo("UP").jsonPath("$.components").doesNotExist();
            http.get().uri("/actuator/metrics").exchange().expectStatus().isNotFound();

            Map<String, Object> job = Map.of("type", "greet", "args", "x");
            http.post().uri("/api/jobs").header("Origin", "https://evil.example").bodyValue(job).exchange()
                    .expectStatus().isForbidden()
                    .expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_PROBLEM_JSON)
                    .expectBody().jsonPath("$.detail").value(detail -> assertThat((String) detail).contains("cross-site"));
            http.post().uri("/api/instances/1/cancel").header("Sec-Fetch-Site", "cross-site").exchange()
                    .expectStatus().isForbidden();
            http.post().uri("/api/jobs").header("Origin", app.baseUrl()).header("Sec-Fetch-Site", "same-origin")
                    .bodyValue(job).exchange().expectStatus().isCreated();
            http.post().uri("/api/jobs").bodyValue(job).exchange().expectStatus().isCreated(); // curl: no Origin

            Flux<ServerSentEvent<String>> stream = http.get().uri("/api/events").accept(MediaType.TEXT_EVENT_STREAM)
                    .exchange().expectStatus().isOk()
                    .returnResult(new ParameterizedTypeReference<ServerSentEvent<String>>() { })
                    .getResponseBody();
            StepVerifier.create(stream)
                    .expectNextMatches(first -> "connected".equals(first.comment()))
                    .then(app::close)
                    .thenConsumeWhile(event -> true)
                    .expectComplete()
                    .verify(Duration.ofSeconds(60));
        } finally {
            app.close();
        }
    }
}
