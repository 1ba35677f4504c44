package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.durable.DurableEngine;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Limits;
import dev.durable.QueueOptions;
import dev.durable.InstanceStatus;
import dev.durable.Outcome;
import dev.durable.WorkflowDefinition;
import reactor.core.publisher.Sinks;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterContext;
import dev.durable.limit.LimiterFactory;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.ExecutingSampler;
import dev.durable.support.RateWindows;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/** The Redis limiter under real concurrency: three engines on one database and one Redis. */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisLimiterIT {

    static final Duration WAIT = Duration.ofSeconds(60);

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

    /** The limiter under test; {@code RedisClusterLimiterIT} runs these cases on a Redis Cluster. */
    LimiterFactory limiter() {
        return RedisLimiters.redis(redis.uri());
    }

    /** Empties the Redis the limiter uses, as a restart without persistence does. */
    void flushRedis() {
        redis.flushAll();
    }

    /** A connection to the Redis the limiter uses, to look at its keys. */
    Peek peek() {
        io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(redis.redisUri());
        io.lettuce.core.api.StatefulRedisConnection<String, String> connection = client.connect();
        return new Peek(connection.sync(), () -> {
            connection.close();
            client.shutdown();
        });
    }

    record Peek(RedisClusterCommands<String, String> sync, Runnable closing) implements AutoCloseable {
        @Override
        public void close() {
            closing.run();
        }
    }

    private static long count(TestDatabase db, String where) {
        return Mono.usingWhen(db.connectionFactory().create(),
                connection -> Mono.from(connection.createStatement("SELECT count(*) FROM \"" + db.schema()
                                + "\".durable_instances_all WHERE " + where).execute())
                        .flatMap(result -> Mono.from(result.map(row -> row.get(0, Long.class)))),
                Connection::close).block(WAIT);
    }

    /**
     * A job's argument (its state, a JSON string) matches {@code pattern}: what a settled row still
     * tells of its limits, as the history keeps no gate or rate limit.
     */
    private static String argLike(String pattern) {
        return "state #>> '{}' LIKE '" + pattern + "'";
    }

    private static JobDefinition<String, String> tracked(String type, String queue, Map<String, AtomicInteger> active,
            Map<String, AtomicInteger> maxActive, Map<String, AtomicInteger> runs, Duration hold) {
        return JobDefinition.of(type, String.class, (String arg) -> Mono.defer(() -> {
                    runs.computeIfAbsent(arg, k -> new AtomicInteger()).incrementAndGet();
                    String key = arg.substring(0, arg.indexOf('#'));
                    int now = active.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                    maxActive.computeIfAbsent(key, k -> new AtomicInteger()).accumulateAndGet(now, Math::max);
                    return Mono.delay(hold).thenReturn(arg)
                            .doFinally(signal -> active.get(key).decrementAndGet());
                }))
                .queue(queue);
    }

    @Test
    void aGateNeverAdmitsMoreThanItsCapacityAcrossEngines() throws Exception {
        Map<String, AtomicInteger> active = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> maxActive = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
        JobDefinition<String, String> job = tracked("gated", "rgates", active, maxActive, runs, Duration.ofMillis(15));
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            nodes.add(engines.start(engines.options("rgate" + n).limiter(limiter())
                    .gate("rapi", 3).gate("rtenant", 4, 2)
                    .queue(QueueOptions.builder("rgates").concurrency(6).prefetch(4)
                            .pollInterval(Duration.ofMillis(50)).build()), job));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            requests.add(i % 3 == 0 ? JobRequest.of("gated", "api#" + i).gate("rapi", "api")
                    : JobRequest.of("gated", "tenant-" + (i % 3) + "#" + i).gate("rtenant", "t" + (i % 3)));
        }
        try (ExecutingSampler api = new ExecutingSampler(db, "gate_name = 'rapi'");
                ExecutingSampler t1 = new ExecutingSampler(db, "gate_name = 'rtenant' AND concurrency_key = 't1'")) {
            nodes.get(2).insertAll(requests).block(WAIT);
            Eventually.until("all gated jobs done", WAIT, () -> count(db, "queue = 'rgates' AND status = 'done'") == 300);
            api.close();
            t1.close();
            assertThat(api.samples()).isGreaterThan(10);
            assertThat(api.max()).isBetween(1L, 3L);
            assertThat(t1.max()).isBetween(1L, 4L);
        }
        assertThat(maxActive.get("api").get()).isBetween(1, 3);
        assertThat(maxActive.get("tenant-1").get()).isBetween(1, 4);
        assertThat(maxActive.get("tenant-2").get()).isBetween(1, 4);
        assertThat(runs).hasSize(300).allSatisfy((arg, n) -> assertThat(n.get()).as(arg).isEqualTo(1));
        // Every engine asked Redis, and refused rows were never claimed.
        long throttled = nodes.stream().mapToLong(node -> node.queueStats().get(0).throttled()).sum();
        assertThat(throttled).isPositive();
        assertThat(count(db, "queue = 'rgates' AND attempt <> 1")).isZero();
    }

    @Test
    void aRateLimitIsNeverExceededOverAnyWindow() {
        List<Long> starts = Collections.synchronizedList(new ArrayList<>());
        JobDefinition<String, String> job = JobDefinition.of("rlimited", String.class, (String s) -> {
            starts.add(System.nanoTime());
            return Mono.just(s);
        }).queue("rrates");
        DurableEngine producer = null;
        for (int n = 0; n < 3; n++) {
            producer = engines.start(engines.options("rrate" + n).limiter(limiter()).rateLimit("rpartner", 20, 5)
                    .queue(QueueOptions.builder("rrates").concurrency(10).pollInterval(Duration.ofMillis(20))
                            .maxPollInterval(Duration.ofMillis(20)).build()), job);
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            requests.add(JobRequest.of("rlimited", "r" + i).rateLimit("rpartner"));
        }
        producer.insertAll(requests).block(WAIT);
        Eventually.until("all limited jobs done", WAIT, () -> count(db, "queue = 'rrates' AND status = 'done'") == 60);

        assertThat(starts).hasSize(60);
        // 250 ms of slack between an admission and its handler starting (as LimitsIT): on a loaded
        // machine a delayed start can bunch up with the next; an unlimited queue would start all 60 at once.
        RateWindows.assertWithinBucket(starts, 5, 20, 0.25);
    }

    @Test
    void aSaturatedLimitDoesNotStarveOtherWorkInTheQueue() {
        JobDefinition<String, String> job = JobDefinition.of("rany", String.class, (String s) -> Mono.just(s))
                .queue("rmixed");
        engines.start(engines.options("rmixed").limiter(limiter()).rateLimit("rslow", 1, 1).gate("rnarrow", 1)
                .queue(QueueOptions.builder("rmixed").concurrency(4).pollInterval(Duration.ofMillis(50)).build()), job);
        DurableEngine producer = engines.start(engines.options("rmixed-producer").limiter(limiter())
                .rateLimit("rslow", 1, 1).gate("rnarrow", 1), job);
        List<JobRequest> throttled = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            throttled.add(JobRequest.of("rany", "slow" + i).rateLimit("rslow").priority(-1));
            throttled.add(JobRequest.of("rany", "narrow" + i).gate("rnarrow").priority(-1));
        }
        producer.insertAll(throttled).block(WAIT);
        List<JobRequest> free = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            free.add(JobRequest.of("rany", "free" + i));
        }
        producer.insertAll(free).block(WAIT);
        // The throttled rows are more urgent and far more numerous, yet the free ones all run.
        Eventually.until("unrelated work done", Duration.ofSeconds(20),
                () -> count(db, "queue = 'rmixed' AND " + argLike("free%") + " AND status = 'done'") == 100);
        assertThat(count(db, "queue = 'rmixed' AND " + argLike("slow%") + " AND status = 'done'")).isLessThan(50);
    }

    @Test
    void aSlotWhoseHolderNeverRenewsIsFreedWithinItsTtl() {
        Duration ttl = Duration.ofSeconds(3);
        // A holder that takes the only slot and then dies: it never renews nor credits.
        Limiter ghost = limiter().create(new LimiterContext("ghost", db.connectionFactory(), db.schema(),
                Map.of("rsolo", new Limits.Gate("rsolo", 1, 1)), Map.of(), Map.of(), ttl,
                dev.durable.EngineOptions.DEFAULT_CALL_TIMEOUT)).block(WAIT);
        try {
            Set<Long> taken = ghost.admit(List.of(new LimitClaim(-1, "ghost", new dev.durable.limit.GateSlot("rsolo", "k", 0), null, null)))
                    .block(WAIT);
            assertThat(taken).containsExactly(-1L);
            long slotTaken = System.nanoTime();
            Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
            JobDefinition<String, String> job = JobDefinition.of("rsolo", String.class, (String s) -> {
                runs.computeIfAbsent(s, k -> new AtomicInteger()).incrementAndGet();
                return Mono.just(s);
            }).queue("rsolo");
            DurableEngine engine = engines.start(engines.options("rsolo").limiter(limiter()).gate("rsolo", 1)
                    .queue(QueueOptions.builder("rsolo").pollInterval(Duration.ofMillis(50))
                            .maxPollInterval(Duration.ofMillis(100)).build()), job);
            long id = engine.insert(JobRequest.of("rsolo", "waits").gate("rsolo", "k")).block(WAIT);
            engines.awaitStatus(engine, id, dev.durable.InstanceStatus.DONE, Duration.ofSeconds(15));
            Duration waited = Duration.ofNanos(System.nanoTime() - slotTaken);
            // Not before the ghost's slot expired, and soon after: within its TTL plus a poll or two.
            assertThat(waited).isGreaterThan(ttl.minusMillis(300)).isLessThan(ttl.plusSeconds(2));
            assertThat(runs.get("waits").get()).isEqualTo(1);
            assertThat(engine.get(id).block(WAIT).attempt()).isEqualTo(1);
        } finally {
            ghost.close().block(WAIT);
        }
    }

    /**
     * Redis loses its data while two claims hold both slots of a gate: the next admission rebuilds
     * the counter from the live claims the database shows and holds a stand-in for each, so a third
     * row waits; the holders' renewals take their stand-ins' places, and a slot given back lets it
     * in. Renewals are 5 s apart, so the pick after the loss comes long before the holders re-assert.
     */
    @Test
    void aGateWhoseCounterRedisLostAdmitsNoOneNewUntilItsHoldersAreBack() {
        Sinks.Empty<Void> release = Sinks.empty();
        Set<String> started = ConcurrentHashMap.newKeySet();
        AtomicInteger active = new AtomicInteger();
        AtomicInteger maxActive = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("rforgot", String.class, (String s) -> Mono.defer(() -> {
            started.add(s);
            maxActive.accumulateAndGet(active.incrementAndGet(), Math::max);
            return (s.startsWith("hold") ? release.asMono().thenReturn(s) : Mono.just(s))
                    .doFinally(signal -> active.decrementAndGet());
        })).queue("rforgot");
        DurableEngine engine = engines.start(engines.options("rforgot").limiter(limiter()).gate("rforgot", 2)
                .leaseTtl(Duration.ofSeconds(15)).heartbeatInterval(Duration.ofSeconds(5))
                .queue(QueueOptions.builder("rforgot").concurrency(4).pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), job);
        engine.insertAll(List.of(JobRequest.of("rforgot", "hold-1").gate("rforgot", "k"),
                JobRequest.of("rforgot", "hold-2").gate("rforgot", "k"))).block(WAIT);
        Eventually.until("both holders running", WAIT, () -> started.size() == 2);
        // Right after a beat, so the next one (the holders' re-assertion) is 5 s away.
        long beats = engine.queueStats().get(0).heartbeats();
        Eventually.until("a heartbeat", WAIT, () -> engine.queueStats().get(0).heartbeats() > beats);
        String counter = RedisLimiterOptions.DEFAULT_KEY_PREFIX + ":{" + db.schema() + ":gate:rforgot:0:k}";
        try (Peek peek = peek()) {
            flushRedis();
            long late = engine.insert(JobRequest.of("rforgot", "late").gate("rforgot", "k")).block(WAIT);
            Eventually.until("the late row refused by the rebuilt gate", WAIT,
                    () -> engine.queueStats().get(0).throttled() > 0);
            assertThat(started).doesNotContain("late");
            // Rebuilt from the two live claims: stand-ins for whichever holder has not renewed yet.
            assertThat(peek.sync().exists(counter + ":ledger")).isEqualTo(1L);
            assertThat(peek.sync().zcard(counter)).isEqualTo(2L);
            // The holders renew: their own slots take the stand-ins' places, and the gate stays full.
            Eventually.until("both holders back in the counter, no stand-in left", WAIT, () -> {
                List<String> members = peek.sync().zrange(counter, 0, -1);
                return members.size() == 2 && members.stream().noneMatch(member -> member.startsWith("\0standin:"));
            });
            long refused = engine.queueStats().get(0).throttled();
            Eventually.until("the late row refused again", WAIT, () -> engine.queueStats().get(0).throttled() > refused);
            assertThat(started).doesNotContain("late");
            assertThat(engine.get(late).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);

            release.tryEmitEmpty();
            engines.awaitStatus(engine, late, InstanceStatus.DONE, WAIT);
        }
        assertThat(maxActive.get()).isEqualTo(2);
        assertThat(count(db, "queue = 'rforgot' AND status = 'done'")).isEqualTo(3);
    }

    @Test
    void redisStoppedAndRestartedMidRunLosesNothingAndRunsNothingTwice() {
        assumeTrue(redis.isEmbedded(), "needs the embedded Redis to stop and start it");
        Map<String, AtomicInteger> active = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> maxActive = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
        JobDefinition<String, String> job = tracked("routage", "routage", active, maxActive, runs, Duration.ofMillis(20));
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            nodes.add(engines.start(engines.options("routage" + n).limiter(RedisLimiters.redis(redis.redisUri(),
                            RedisLimiterOptions.builder().commandTimeout(Duration.ofMillis(300)).build()))
                    .gate("rout", 2).rateLimit("rout-rate", 200, 20)
                    .queue(QueueOptions.builder("routage").concurrency(4)
                            .pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200)).build()), job));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 120; i++) {
            requests.add(switch (i % 3) {
                case 0 -> JobRequest.of("routage", "gated#" + i).gate("rout", "g");
                case 1 -> JobRequest.of("routage", "rated#" + i).rateLimit("rout-rate");
                default -> JobRequest.of("routage", "free#" + i);
            });
        }
        nodes.get(0).insertAll(requests).block(WAIT);
        Eventually.until("the run under way", WAIT, () -> runs.size() >= 10);
        redis.stop();
        long freeBefore = count(db, "queue = 'routage' AND status = 'done' AND " + argLike("free%"));
        List<JobRequest> during = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            during.add(i % 2 == 0 ? JobRequest.of("routage", "free-during#" + i)
                    : JobRequest.of("routage", "gated-during#" + i).gate("rout", "g"));
        }
        nodes.get(1).insertAll(during).block(WAIT);
        // Unlimited work keeps running while the limiter is away.
        Eventually.until("unlimited rows run during the outage", Duration.ofSeconds(20), () -> count(db,
                "queue = 'routage' AND status = 'done' AND " + argLike("free%")) > freeBefore + 10);
        redis.start();
        Eventually.until("every job done", WAIT, () -> count(db, "queue = 'routage' AND status = 'done'") == 150);
        assertThat(runs).hasSize(150).allSatisfy((arg, n) -> assertThat(n.get()).as(arg).isEqualTo(1));
        assertThat(count(db, "queue = 'routage' AND status <> 'done'")).isZero();
    }

    @Test
    void inlineStepsKeepTheirSlotThroughRenewalsAndGiveItBackWhenTheyLeaveTheGate() {
        Sinks.Empty<Void> holdB = Sinks.empty();
        Sinks.Empty<Void> holdC = Sinks.empty();
        AtomicInteger inB = new AtomicInteger();
        AtomicInteger inC = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("rchain", String.class).queue("rinline")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.defer(() -> {
                    inB.incrementAndGet();
                    return holdB.asMono().thenReturn(Outcome.next("c", ctx.state() + "b").inline().releaseConcurrencyKey());
                }))
                .step("c", ctx -> Mono.defer(() -> {
                    inC.incrementAndGet();
                    return holdC.asMono().thenReturn(Outcome.<String>done(ctx.state() + "c"));
                }))
                .build();
        JobDefinition<String, String> gated = JobDefinition.of("rgated", String.class, (String s) -> Mono.just(s))
                .queue("rinline");
        DurableEngine engine = engines.build(engines.options("rinline").limiter(limiter()).gate("rone", 1)
                .queue(QueueOptions.builder("rinline").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), gated);
        DurableEngine withChain = DurableEngine.builder(engines.options("rinline-chain").limiter(limiter())
                .gate("rone", 1).queue(QueueOptions.builder("rinline").pollInterval(Duration.ofMillis(50)).build())
                .build()).register(chain).register(gated).build();
        try {
            withChain.start().block(WAIT);
            long id = withChain.insert(JobRequest.of("rchain", "").gate("rone", "g")).block(WAIT);
            Eventually.until("in step b", WAIT, () -> inB.get() == 1);
            // Started only now: it knows no rchain, so it must not pick the chain's row.
            engine.start().block(WAIT);
            long waiting = engine.insert(JobRequest.of("rgated", "w").gate("rone", "g")).block(WAIT);
            // Longer than the 3.5 s slot TTL (lease and a beat): only the heartbeat's renewals keep the
            // inline step's slot.
            Eventually.sleep(4500);
            assertThat(engine.get(waiting).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
            holdB.tryEmitEmpty();
            Eventually.until("in step c", WAIT, () -> inC.get() == 1);
            // Step c released its key, so it left the gate: the slot went back while c still runs.
            engines.awaitStatus(engine, waiting, InstanceStatus.DONE, Duration.ofSeconds(10));
            assertThat(withChain.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.EXECUTING);
            holdC.tryEmitEmpty();
            engines.awaitStatus(withChain, id, InstanceStatus.DONE, WAIT);
        } finally {
            holdB.tryEmitEmpty();
            holdC.tryEmitEmpty();
            withChain.closeLater().block(WAIT);
        }
    }

    @Test
    void anInlineStepDrawsItsTokensFromRedisAndGoesThroughTheQueueWhenTheBucketIsEmpty() {
        AtomicInteger secondSteps = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("rtrickle", String.class).queue("rtrickle")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.fromSupplier(() -> {
                    secondSteps.incrementAndGet();
                    return Outcome.<String>done(ctx.state() + "b");
                }))
                .build();
        io.micrometer.core.instrument.simple.SimpleMeterRegistry meters =
                new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
        DurableEngine engine = engines.start(engines.options("rtrickle").limiter(limiter()).meterRegistry(meters)
                .rateLimit("rtrickle", 0.001, 1).gate("rsolo", 1)
                .queue(QueueOptions.builder("rtrickle").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), chain);
        long id = engine.insert(JobRequest.of("rtrickle", "").rateLimit("rtrickle").gate("rsolo", "k")).block(WAIT);

        // The pick's admission took the bucket's only token; the inline step found it empty.
        Eventually.until("step b back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "b".equals(instance.step()));
        assertThat(secondSteps.get()).isZero();
        // Back in the queue, the row is refused at each pick: counted as held by its gate (the
        // limiter does not say which limit refused a claim with both).
        Eventually.until("the refusal counted", WAIT, () -> {
            var counter = meters.find("durable.throttled").tag("queue", "rtrickle").tag("limit", "gate")
                    .functionCounter();
            return counter != null && counter.count() > 0;
        });
        assertThat(secondSteps.get()).isZero();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
    }
}
