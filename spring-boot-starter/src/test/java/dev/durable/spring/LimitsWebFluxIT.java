package dev.durable.spring;

import static org.springframework.web.reactive.function.server.RequestPredicates.POST;

import dev.durable.DurableEngine;
import dev.durable.limit.Permit;
import dev.durable.limit.PermitTimeoutException;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/** The WebFlux example of engine.limits() in docs/limits-and-fairness.md: a handler that shares the jobs' limits (issue 21). */
class LimitsWebFluxIT {

    private static TestDatabase db;

    @BeforeAll
    static void database() {
        db = TestPostgres.newDatabase("limits_webflux");
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    private static Mono<String> render(String tenant) {
        return Mono.just("report of " + tenant);
    }

    // tag::limits-webflux[]
    static RouterFunction<ServerResponse> routes(DurableEngine engine) {
        return RouterFunctions.route(POST("/reports/{tenant}"), request -> {
            String tenant = request.pathVariable("tenant");
            return engine.limits().tryAcquire("reports-per-hour", tenant, 1)   // sliding window, per tenant
                    .flatMap(quota -> quota.isEmpty()
                            ? ServerResponse.status(HttpStatus.TOO_MANY_REQUESTS).build()
                            : Mono.usingWhen(                                // the jobs' gate: a slot while we render
                                    engine.limits().acquire("renderer", "", 1, Duration.ofSeconds(2), Duration.ofSeconds(30)),
                                    permit -> render(tenant).flatMap(report -> ServerResponse.ok().bodyValue(report)),
                                    Permit::release))
                    .onErrorResume(PermitTimeoutException.class,
                            busy -> ServerResponse.status(HttpStatus.SERVICE_UNAVAILABLE).build());
        });
    }
    // end::limits-webflux[]

    @Test
    void theHandlerAnswersWithinTheWindowAndRefusesPastIt() {
        DurableEngine engine = DurableEngine.builder(db.engineOptions().name("limits-webflux")
                        .window("reports-per-hour", 3, Duration.ofHours(1)).gate("renderer", 2).build())
                .build();
        engine.start().block(Duration.ofMinutes(1));
        try {
            WebTestClient client = WebTestClient.bindToRouterFunction(routes(engine)).build();
            for (int i = 0; i < 3; i++) {
                client.post().uri("/reports/acme").exchange().expectStatus().isOk()
                        .expectBody(String.class).isEqualTo("report of acme");
            }
            client.post().uri("/reports/acme").exchange().expectStatus().isEqualTo(HttpStatus.TOO_MANY_REQUESTS);
            client.post().uri("/reports/globex").exchange().expectStatus().isOk();

            // Every renderer slot held (by jobs or other callers): the handler waits its two seconds, then 503.
            Permit one = engine.limits().tryAcquire("renderer", "", 2).block(Duration.ofSeconds(30)).orElseThrow();
            client.post().uri("/reports/initech").exchange().expectStatus().isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
            one.release().block(Duration.ofSeconds(30));
        } finally {
            engine.closeLater().block(Duration.ofMinutes(1));
        }
    }
}
