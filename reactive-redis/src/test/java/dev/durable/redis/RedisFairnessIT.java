package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.DurableEngine;
import dev.durable.Fairness;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import dev.durable.limit.LimiterFactory;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
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
import reactor.core.publisher.Sinks;

/**
 * Fair share with the Redis limiter (issue 21): PostgreSQL orders and offers the candidates across
 * the fairness keys by weight, Redis admits them, a per-key cap (the gate {@code fairness.<queue>})
 * included. Counted in starts, never in time.
 */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisFairnessIT {

    static final Duration WAIT = Duration.ofSeconds(120);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;
    private TestRedisServer redis;

    @BeforeEach
    void setUp(TestDatabase database, TestRedisServer server) {
        db = database;
        redis = server;
        engines.on(database);
    }

    /** The limiter under test; {@code RedisClusterFairnessIT} runs these cases on a Redis Cluster. */
    LimiterFactory limiter() {
        return RedisLimiters.redis(redis.uri());
    }

    @Test
    void saturatedKeysShareStartsByWeight() {
        List<String> starts = Collections.synchronizedList(new ArrayList<>());
        JobDefinition<String, String> job = JobDefinition.of("rfair", String.class, (String key) -> {
            starts.add(key);
            return Mono.just(key);
        }).queue("rfair");
        DurableEngine engine = engines.start(engines.options("rfair").limiter(limiter())
                .queue(QueueOptions.builder("rfair").concurrency(12).pollInterval(Duration.ofMillis(50))
                        .fairness(Fairness.builder().weight("gold", 3).weight("silver", 2).build()).build()), job);
        List<JobRequest> requests = new ArrayList<>();
        for (String key : List.of("gold", "silver", "bronze")) {
            for (int i = 0; i < 400; i++) {
                requests.add(JobRequest.of("rfair", key).fairnessKey(key));
            }
        }
        // Inserted while the engine's queue is paused, so every key is saturated from the first pick.
        engine.admin().pauseQueue("rfair").block(WAIT);
        engine.insertAll(requests).block(WAIT);
        engine.admin().resumeQueue("rfair").block(WAIT);
        Eventually.until("600 starts", WAIT, () -> starts.size() >= 600);

        Map<String, Long> shares = new ConcurrentHashMap<>();
        List<String> first;
        // Handlers still add while the first 600 are copied: the view and its copy under the list's lock
        // (a view made outside it fails with a ConcurrentModificationException once one more start lands).
        synchronized (starts) {
            first = List.copyOf(starts.subList(0, 600));
        }
        first.forEach(key -> shares.merge(key, 1L, Long::sum));
        // 3:2:1 of 600, within a pick or two of the exact 300/200/100.
        assertThat(shares.get("gold")).as("gold's share of %s", shares).isBetween(276L, 324L);
        assertThat(shares.get("silver")).as("silver's share of %s", shares).isBetween(176L, 224L);
        assertThat(shares.get("bronze")).as("bronze's share of %s", shares).isBetween(76L, 124L);
        Eventually.until("all done", WAIT, () -> Sql.count(db, "queue = 'rfair' AND status = 'done'") == 1200);
    }

    @Test
    void aPerKeyCapHoldsAcrossEnginesAndTheOtherKeysKeepTheirShare() {
        Map<String, AtomicInteger> running = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> most = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
        JobDefinition<String, String> job = JobDefinition.of("rcapped", String.class, (String key) -> {
            runs.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            int now = running.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            most.computeIfAbsent(key, k -> new AtomicInteger()).accumulateAndGet(now, Math::max);
            return Mono.delay(Duration.ofMillis(50)).then(Mono.fromCallable(() -> {
                running.get(key).decrementAndGet();
                return key;
            }));
        }).queue("rcapped");
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 2; n++) {
            nodes.add(engines.start(engines.options("rcapped" + n).limiter(limiter())
                    .queue(QueueOptions.builder("rcapped").concurrency(8).pollInterval(Duration.ofMillis(50))
                            .maxPollInterval(Duration.ofMillis(100))
                            .fairness(Fairness.builder().weight("whale", 4).maxExecutingPerKey(2).build()).build()),
                    job));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            requests.add(JobRequest.of("rcapped", "whale").fairnessKey("whale"));
            if (i % 4 == 0) {
                requests.add(JobRequest.of("rcapped", "minnow").fairnessKey("minnow"));
            }
        }
        nodes.get(0).insertAll(requests).block(WAIT);
        Eventually.until("every capped row done", WAIT,
                () -> Sql.count(db, "queue = 'rcapped' AND status = 'done'") == 50);
        // Never more than the cap per key across both engines; every row ran once, none lost an attempt.
        assertThat(most.get("whale").get()).as("most whale rows executing at once").isBetween(1, 2);
        assertThat(most.get("minnow").get()).as("most minnow rows executing at once").isBetween(1, 2);
        assertThat(runs.get("whale").get()).isEqualTo(40);
        assertThat(runs.get("minnow").get()).isEqualTo(10);
        assertThat(Sql.count(db, "queue = 'rcapped' AND attempt <> 1")).isZero();
        // The whale's capped rows were refused by Redis, not claimed.
        long throttled = nodes.stream().mapToLong(node -> node.queueStats("rcapped").orElseThrow().throttled()).sum();
        assertThat(throttled).isPositive();
    }

    /**
     * A workflow step moved to another fairness key takes that key's cap gate with it, admitted by
     * Redis under the new key: while two jobs of key b hold its cap of 2, the steps moved from key a
     * to b wait (a cap gate left under a would admit them), and then at most 2 of them run at once.
     */
    @Test
    void aStepMovedToAnotherKeyIsCappedUnderIt() {
        AtomicInteger running = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger blocking = new AtomicInteger();
        Sinks.Empty<Void> unblock = Sinks.empty();
        JobDefinition<String, String> blocker = JobDefinition.of("rblock", String.class, (String key) -> {
            blocking.incrementAndGet();
            return unblock.asMono().then(Mono.just(key));
        }).queue("rmove");
        WorkflowDefinition<String> move = WorkflowDefinition.builder("rmove", String.class).queue("rmove")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state()).fairnessKey("tenant-b")))
                .step("b", ctx -> {
                    most.accumulateAndGet(running.incrementAndGet(), Math::max);
                    return Mono.delay(Duration.ofMillis(100)).then(Mono.fromCallable(() -> {
                        running.decrementAndGet();
                        return Outcome.<String>done(ctx.state());
                    }));
                })
                .build();
        DurableEngine engine = engines.start(engines.options("rmove").limiter(limiter())
                .queue(QueueOptions.builder("rmove").concurrency(8).pollInterval(Duration.ofMillis(50))
                        .fairness(Fairness.builder().maxExecutingPerKey(2).build()).build()), blocker, move);
        engine.insertAll(List.of(JobRequest.of("rblock", "x").fairnessKey("tenant-b"),
                JobRequest.of("rblock", "y").fairnessKey("tenant-b"))).block(WAIT);
        Eventually.until("b's cap held by two jobs", WAIT, () -> blocking.get() == 2);
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            requests.add(JobRequest.of("rmove", "s" + i).fairnessKey("tenant-a"));
        }
        engine.insertAll(requests).block(WAIT);
        Eventually.until("the moved steps waiting", WAIT,
                () -> Sql.count(db, "queue = 'rmove' AND step = 'b' AND status = 'runnable'") == 6);
        long picks = engine.queueStats("rmove").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("rmove").orElseThrow().picks() >= picks + 3);
        assertThat(most.get()).as("moved steps run while b's cap is held").isZero();

        unblock.tryEmitEmpty();
        Eventually.until("every row done", WAIT, () -> Sql.count(db, "queue = 'rmove' AND status = 'done'") == 8);
        assertThat(most.get()).as("most moved steps executing at once").isBetween(1, 2);
        assertThat(Sql.query(db, "SELECT DISTINCT fairness_key FROM {schema}.durable_history WHERE queue = 'rmove'",
                row -> row.get(0, String.class))).containsExactly("tenant-b");
    }

    @Test
    void perKeyCapsByAFunctionAreRefusedAtStart() {
        // Redis admits the cap gate at one capacity for every key: a cap per key would go unenforced.
        JobDefinition<String, String> job = JobDefinition.of("rfcaps", String.class, Mono::just).queue("rfcaps");
        assertThatThrownBy(() -> engines.start(engines.options("rfcaps").limiter(limiter())
                        .queue(QueueOptions.builder("rfcaps")
                                .fairness(Fairness.builder().maxExecutingPerKey(key -> 2).build()).build()), job))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("per-key caps by a function need the PostgreSQL limiter");
    }
}
