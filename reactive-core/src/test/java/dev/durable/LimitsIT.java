package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.limit.LimiterUnderTest;
import dev.durable.limit.LimitsContract;
import dev.durable.limit.PostgresUnderTest;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/** The limiter contract's gates and buckets on the PostgreSQL limiter, and what only it does: its counters healed by the reconcile. */
class LimitsIT extends LimitsContract {

    @Override
    protected LimiterUnderTest limiter() {
        return new PostgresUnderTest(db);
    }

    @Test
    void gcDeletesOldSettledRowsButSparesChildrenOfLiveParentsAndReconcileHealsCounters() {
        JobDefinition<String, String> job = JobDefinition.of("any", String.class, (String s) -> Mono.just(s)).queue("gc");
        DurableEngine engine = engines.start(engines.options("gc").gate("g", 2).retention(Duration.ofHours(1))
                .queue(QueueOptions.builder("gc").pollInterval(Duration.ofMillis(50)).build()), job);
        List<Long> ids = engine.insertAll(List.of(JobRequest.of("any", "a"), JobRequest.of("any", "b"))).block();
        Eventually.until("done", WAIT, () -> Sql.count(db, "queue = 'gc' AND status = 'done'") == 2);
        long parent = engine.insert(JobRequest.of("any", "parent").runIn(Duration.ofHours(1))).block();
        // Settled rows live in the history: made two hours old there, one the child of a live parent.
        Sql.update(db, "UPDATE {schema}.durable_history SET parent_id = $1 WHERE id = $2", parent, ids.get(1));
        Sql.update(db, "UPDATE {schema}.durable_history SET settled_at = now() - interval '2 hours' WHERE id IN ($1, $2)",
                ids.get(0), ids.get(1));
        assertThat(engine.maintenance().orElseThrow().collectGarbage().block()).isEqualTo(1);
        assertThat(engine.get(ids.get(0)).blockOptional()).isEmpty();
        assertThat(engine.get(ids.get(1)).blockOptional()).isPresent();

        Sql.update(db, "INSERT INTO {schema}.durable_gate_slots (gate, key, shard, capacity, held) VALUES ('g', '', 0, 2, 2)");
        assertThat(engine.maintenance().orElseThrow().reconcileLimits().block()).isEqualTo(1);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_gate_slots", row -> row.get(0, Long.class)))
                .containsExactly(0L);
    }

    @Test
    void theThroughputCostOfAGate() {
        JobDefinition<String, String> job = JobDefinition.of("cost", String.class, (String s) -> Mono.just(s)).queue("cost");
        DurableEngine engine = engines.start(engines.options("cost").gate("wide", 64)
                .handlerScheduler(reactor.core.scheduler.Schedulers.parallel())
                .queue(QueueOptions.builder("cost").concurrency(64).prefetch(64).minDemand(32)
                        .pollInterval(Duration.ofMillis(50)).build()), job);
        double plain = rate(engine, "plain", false);
        double gated = rate(engine, "gated", true);
        // A measurement for the record, not an assertion on speed.
        System.out.printf("GATE_COST jobs=2000 no_gate_jobs_per_s=%.0f gate_jobs_per_s=%.0f ratio=%.2f%n",
                plain, gated, gated / plain);
        assertThat(gated).isPositive();
    }

    private double rate(DurableEngine engine, String label, boolean gated) {
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 2000; i++) {
            JobRequest request = JobRequest.of("cost", label + i);
            requests.add(gated ? request.gate("wide") : request);
        }
        long started = System.nanoTime();
        engine.insertAll(requests).block();
        Eventually.until(label + " done", WAIT,
                () -> Sql.count(db, "queue = 'cost' AND status = 'done' AND state::text LIKE '\"" + label + "%'") == 2000);
        return 2000 / ((System.nanoTime() - started) / 1e9);
    }
}
