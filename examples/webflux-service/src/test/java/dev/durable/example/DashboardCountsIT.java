package dev.durable.example;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.test.web.reactive.server.WebTestClient;
import reactor.core.publisher.Flux;

/**
 * The dashboard's counts over a history too large to count: live and unsuccessful counts stay
 * exact, done counts come from a sample and say so.
 */
class DashboardCountsIT {

    private static final Duration WAIT = Duration.ofMinutes(1);
    private static final int DONE = 3 * DashboardQueries.SAMPLED_ROWS;
    private static final int FAILED = 37;

    private static RunningExample app;
    private static WebTestClient http;
    private static DurableEngine engine;

    @BeforeAll
    static void start() {
        app = RunningExample.start("durable.schema=dashboard_counts_it");
        http = app.client();
        engine = app.bean(DurableEngine.class);
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    @Test
    void doneCountsOfALargeHistoryAreEstimatedTheOthersExact() {
        String history = "\"" + engine.options().schema() + "\".durable_history";
        execute("INSERT INTO " + history + " (id, type, type_version, queue, priority, status, step, attempt,"
                + " max_attempts, eligible_at, inserted_at) SELECT 1000000 + g, 'bulk', 1, 'bulk', 0,"
                + " CASE WHEN g <= " + FAILED + " THEN 'failed' ELSE 'done' END, 'run', 1, 1, now(), now()"
                + " FROM generate_series(1, " + (DONE + FAILED) + ") AS g");
        // The planner's row count is what decides to sample (autovacuum would set it in a while).
        execute("ANALYZE " + history);

        Map<String, Object> bulk = queues().stream().filter(queue -> "bulk".equals(queue.get("queue")))
                .findFirst().orElseThrow();
        Map<?, ?> counts = (Map<?, ?>) bulk.get("counts");
        assertThat(bulk.get("doneEstimated")).isEqualTo(true);
        assertThat(((Number) counts.get("failed")).longValue()).isEqualTo(FAILED);
        // A third of the blocks, scaled up: near the truth, not exact.
        assertThat(((Number) counts.get("done")).longValue()).isBetween(DONE * 7L / 10, DONE * 13L / 10);
        assertThat(((Number) counts.get("runnable")).longValue()).isZero();
    }

    private static List<Map<String, Object>> queues() {
        return http.get().uri("/api/dashboard/queues").exchange().expectStatus().isOk()
                .expectBody(new ParameterizedTypeReference<List<Map<String, Object>>>() { })
                .returnResult().getResponseBody();
    }

    private static void execute(String sql) {
        Flux.usingWhen(ConnectionFactories.get(String.valueOf(engine.options().url())).create(),
                        (Connection connection) -> Flux.from(connection.createStatement(sql).execute())
                                .flatMap(result -> result.getRowsUpdated()),
                        Connection::close)
                .blockLast(WAIT);
    }
}
