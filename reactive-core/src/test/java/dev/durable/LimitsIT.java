package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.ExecutingSampler;
import dev.durable.support.RateWindows;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class LimitsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private static JobDefinition<String, String> tracked(String type, String queue, Map<String, AtomicInteger> active,
            Map<String, AtomicInteger> maxActive, Duration hold) {
        // The handler's work ends before it emits: a finally hook could run after the engine had
        // committed, given the slot back and another engine started the next holder.
        return JobDefinition.of(type, String.class, (String key) -> Mono.defer(() -> {
                    int now = active.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                    maxActive.computeIfAbsent(key, k -> new AtomicInteger()).accumulateAndGet(now, Math::max);
                    return Mono.delay(hold).map(tick -> {
                        active.get(key).decrementAndGet();
                        return key;
                    });
                }))
                .queue(queue);
    }

    @Test
    void aGateNeverAdmitsMoreThanItsCapacityAcrossEngines() throws Exception {
        Map<String, AtomicInteger> active = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> maxActive = new ConcurrentHashMap<>();
        JobDefinition<String, String> job = tracked("gated", "gates", active, maxActive, Duration.ofMillis(15));
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            nodes.add(engines.start(engines.options("gate" + n)
                    .gate("api", 3).gate("tenant", 4, 2)
                    .queue(QueueOptions.builder("gates").concurrency(6).prefetch(4)
                            .pollInterval(Duration.ofMillis(50)).build()), job));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            requests.add(i % 3 == 0 ? JobRequest.of("gated", "api").gate("api")
                    : JobRequest.of("gated", "tenant-" + (i % 3)).gate("tenant", "t" + (i % 3)));
        }
        try (ExecutingSampler api = new ExecutingSampler(db, "gate_name = 'api'");
                ExecutingSampler t1 = new ExecutingSampler(db, "gate_name = 'tenant' AND concurrency_key = 't1'")) {
            nodes.get(2).insertAll(requests).block();
            Eventually.until("all gated jobs done", WAIT, () -> Sql.count(db, "queue = 'gates' AND status = 'done'") == 300);
            api.close();
            t1.close();
            assertThat(api.samples()).isGreaterThan(10);
            assertThat(api.max()).isBetween(1L, 3L);
            assertThat(t1.max()).isBetween(1L, 4L);
        }
        assertThat(maxActive.get("api").get()).isBetween(1, 3);
        assertThat(maxActive.get("tenant-1").get()).isBetween(1, 4);
        assertThat(maxActive.get("tenant-2").get()).isBetween(1, 4);
        // Every slot was given back.
        assertThat(Sql.query(db, "SELECT coalesce(sum(held), 0)::bigint FROM {schema}.durable_gate_slots",
                row -> row.get(0, Long.class))).containsExactly(0L);
    }

    @Test
    void aRateLimitIsNeverExceededOverAnyWindow() {
        List<Long> starts = Collections.synchronizedList(new ArrayList<>());
        JobDefinition<String, String> job = JobDefinition.of("limited", String.class, (String s) -> {
            starts.add(System.nanoTime());
            return Mono.just(s);
        }).queue("rates");
        for (int n = 0; n < 2; n++) {
            engines.start(engines.options("rate" + n).rateLimit("partner-api", 20, 5)
                    .queue(QueueOptions.builder("rates").concurrency(10).pollInterval(Duration.ofMillis(20))
                            .maxPollInterval(Duration.ofMillis(20)).build()), job);
        }
        DurableEngine producer = engines.start(engines.options("rate-producer").rateLimit("partner-api", 20, 5), job);
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            requests.add(JobRequest.of("limited", "r" + i).rateLimit("partner-api"));
        }
        producer.insertAll(requests).block();
        Eventually.until("all limited jobs done", WAIT, () -> Sql.count(db, "queue = 'rates' AND status = 'done'") == 60);

        // A handler starts a little after its claim, and a busy machine can bunch a few starts.
        RateWindows.assertWithinBucket(starts, 5, 20, 0.25);
    }

    @Test
    void aSaturatedLimitDoesNotStarveOtherWorkInTheQueue() {
        JobDefinition<String, String> job = JobDefinition.of("any", String.class, (String s) -> Mono.just(s)).queue("mixed");
        DurableEngine engine = engines.start(engines.options("mixed").rateLimit("slow", 1, 1).gate("narrow", 1)
                .queue(QueueOptions.builder("mixed").concurrency(4).pollInterval(Duration.ofMillis(50)).build()), job);
        List<JobRequest> throttled = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            throttled.add(JobRequest.of("any", "slow" + i).rateLimit("slow").priority(-1));
            throttled.add(JobRequest.of("any", "narrow" + i).gate("narrow").priority(-1));
        }
        engine.insertAll(throttled).block();
        List<JobRequest> free = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            free.add(JobRequest.of("any", "free" + i));
        }
        engine.insertAll(free).block();
        // The throttled rows are more urgent and far more numerous, yet the free ones all run.
        Eventually.until("unrelated work done", Duration.ofSeconds(20),
                () -> Sql.count(db, "queue = 'mixed' AND state::text LIKE '\"free%' AND status = 'done'") == 100);
        assertThat(Sql.count(db, "queue = 'mixed' AND state::text LIKE '\"slow%' AND status = 'done'")).isLessThan(50);
    }

    @Test
    void unknownLimitsAndWeightsAboveBurstAreRefused() {
        DurableEngine engine = engines.start(engines.options("strict").rateLimit("api", 10, 3).gate("g", 2),
                JobDefinition.of("any", String.class, (String s) -> Mono.just(s)));
        assertThatThrownBy(() -> engine.insert(JobRequest.of("any", "x").gate("nope")).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("unknown gate 'nope'");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("any", "x").rateLimit("nope")).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("unknown rate limit 'nope'");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("any", "x").rateLimit("api", 4, null)).block())
                .isInstanceOf(InvalidRequestException.class).hasMessage("weight of rate limit api must be 1 to its burst 3, was 4");
        assertThatThrownBy(() -> EngineOptions.builder().gate("g", 0))
                .hasMessage("capacity of gate g must be at least 1, was 0");
        assertThatThrownBy(() -> EngineOptions.builder().gate("g", 2, 3))
                .hasMessageContaining("shards of gate g must not exceed its capacity");
        assertThatThrownBy(() -> EngineOptions.builder().rateLimit("r", 0, 1))
                .hasMessageContaining("rate of rate limit r must be positive");
        assertThatThrownBy(() -> Outcome.next("s", "x").inline().gate("g", "k"))
                .hasMessageContaining("cannot be inline");
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
