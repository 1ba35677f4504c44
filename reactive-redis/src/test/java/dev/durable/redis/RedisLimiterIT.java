package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Limits;
import dev.durable.QueueOptions;
import dev.durable.limit.GateSlot;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterContext;
import dev.durable.limit.LimiterUnderTest;
import dev.durable.limit.LimitsContract;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The limiter contract's gates and buckets on the Redis limiter, with three engines on one database
 * and one Redis, and what only a lease-native limiter does: a slot whose holder died expires, a
 * counter Redis lost is rebuilt from the database, and an outage of Redis loses and doubles nothing.
 */
@ExtendWith(RedisExtension.class)
class RedisLimiterIT extends LimitsContract {

    private TestRedisServer redis;

    @BeforeEach
    void onRedis(TestRedisServer server) {
        redis = server;
    }

    /** The limiter under test; {@code RedisClusterLimiterIT} runs these cases on a Redis Cluster. */
    RedisUnderTest redisLimiter() {
        return RedisUnderTest.standalone(redis, db);
    }

    @Override
    protected LimiterUnderTest limiter() {
        return redisLimiter();
    }

    /** Empties the Redis the limiter uses, as a restart without persistence does. */
    void flushRedis() {
        redis.flushAll();
    }

    @Test
    void aSlotWhoseHolderNeverRenewsIsFreedWithinItsTtl() {
        Duration ttl = Duration.ofSeconds(3);
        // A holder that takes the only slot and then dies: it never renews nor credits.
        Limiter ghost = limiter().factory().create(new LimiterContext("ghost", db.connectionFactory(), db.schema(),
                Map.of("rsolo", new Limits.Gate("rsolo", 1, 1)), Map.of(), Map.of(), ttl,
                EngineOptions.DEFAULT_CALL_TIMEOUT)).block(WAIT);
        try {
            Set<Long> taken = ghost.admit(List.of(new LimitClaim(-1, "ghost", new GateSlot("rsolo", "k", 0), null, null)))
                    .block(WAIT);
            assertThat(taken).containsExactly(-1L);
            long slotTaken = System.nanoTime();
            Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
            JobDefinition<String, String> job = JobDefinition.of("rsolo", String.class, (String s) -> {
                runs.computeIfAbsent(s, k -> new AtomicInteger()).incrementAndGet();
                return Mono.just(s);
            }).queue("rsolo");
            DurableEngine engine = engines.start(options("rsolo").gate("rsolo", 1)
                    .queue(QueueOptions.builder("rsolo").pollInterval(Duration.ofMillis(50))
                            .maxPollInterval(Duration.ofMillis(100)).build()), job);
            long id = engine.insert(JobRequest.of("rsolo", "waits").gate("rsolo", "k")).block(WAIT);
            engines.awaitStatus(engine, id, InstanceStatus.DONE, Duration.ofSeconds(15));
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
     * A credit never overtakes a renewal that carries its slot. A renewal's slots are read when it
     * starts and written when its script runs, and between the two lie the engine's scheduling and,
     * on a node that does not know the script yet (a fresh Cluster node), a NOSCRIPT answer and the
     * script sent again. A run that ended in that window credited its slot at once, Redis dropped it,
     * and the renewal took it again (a renewal re-asserts a missing slot), so the gate stayed full
     * until the slot's TTL: the CI failure of
     * {@link dev.durable.limit.StackedLimitsContract#aRowItsBucketRefusesTakesNoWindowCountAndTheTighterLimitAdmits} on
     * the Cluster. Here the renewal that carries the run's slot reaches Redis only once the run has
     * ended and the test lets it go.
     */
    @Test
    void aCreditWaitsForTheRenewalThatCarriesItsSlot() {
        Sinks.Empty<Void> renewalSent = Sinks.empty();
        Sinks.Empty<Void> letRenewalsGo = Sinks.empty();
        List<String> landed = new java.util.concurrent.CopyOnWriteArrayList<>();
        AtomicInteger renewalsInFlight = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("rcredit", String.class,
                (String s) -> renewalSent.asMono().thenReturn(s)).queue("rcredit");
        DurableEngine engine = engines.start(options("rcredit").gate("rcredit", 1)
                .limiter(context -> limiter().factory().create(context).map(real ->
                        new HeldRenewals(real, renewalSent, letRenewalsGo.asMono(), landed, renewalsInFlight)))
                .leaseTtl(Duration.ofSeconds(30)).heartbeatInterval(Duration.ofMillis(200))
                .queue(QueueOptions.builder("rcredit").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), job);
        long id = engine.insert(JobRequest.of("rcredit", "one").gate("rcredit", "k")).block(WAIT);
        // The handler ends once a renewal carrying its slot has been sent; that renewal is held.
        engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        letRenewalsGo.tryEmitEmpty();
        Eventually.until("the slot credited and no renewal on its way", WAIT,
                () -> landed.contains("credited") && renewalsInFlight.get() == 0);
        assertThat(limiter().heldSlots("rcredit", "k")).isZero();
        assertThat(landed).containsSubsequence("renewed", "credited").last().isEqualTo("credited");
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
        DurableEngine engine = engines.start(options("rforgot").gate("rforgot", 2)
                .leaseTtl(Duration.ofSeconds(15)).heartbeatInterval(Duration.ofSeconds(5))
                .queue(QueueOptions.builder("rforgot").concurrency(4).pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), job);
        engine.insertAll(List.of(JobRequest.of("rforgot", "hold-1").gate("rforgot", "k"),
                JobRequest.of("rforgot", "hold-2").gate("rforgot", "k"))).block(WAIT);
        Eventually.until("both holders running", WAIT, () -> started.size() == 2);
        // Right after a beat, so the next one (the holders' re-assertion) is 5 s away.
        long beats = engine.queueStats().get(0).heartbeats();
        Eventually.until("a heartbeat", WAIT, () -> engine.queueStats().get(0).heartbeats() > beats);
        String counter = redisLimiter().gateKey("rforgot", "k", 0);
        try (RedisUnderTest.Peek peek = redisLimiter().peek()) {
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
        assertThat(Sql.count(db, "queue = 'rforgot' AND status = 'done'")).isEqualTo(3);
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
        long freeBefore = Sql.count(db, "queue = 'routage' AND status = 'done' AND " + argLike("free%"));
        List<JobRequest> during = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            during.add(i % 2 == 0 ? JobRequest.of("routage", "free-during#" + i)
                    : JobRequest.of("routage", "gated-during#" + i).gate("rout", "g"));
        }
        nodes.get(1).insertAll(during).block(WAIT);
        // Unlimited work keeps running while the limiter is away.
        Eventually.until("unlimited rows run during the outage", Duration.ofSeconds(20), () -> Sql.count(db,
                "queue = 'routage' AND status = 'done' AND " + argLike("free%")) > freeBefore + 10);
        redis.start();
        Eventually.until("every job done", WAIT, () -> Sql.count(db, "queue = 'routage' AND status = 'done'") == 150);
        assertThat(runs).hasSize(150).allSatisfy((arg, n) -> assertThat(n.get()).as(arg).isEqualTo(1));
        assertThat(Sql.count(db, "queue = 'routage' AND status <> 'done'")).isZero();
    }

    /**
     * A limiter whose renewals reach it only once {@code letGo} completes, recording in {@code landed}
     * when each renewal and credit took effect.
     */
    private record HeldRenewals(Limiter real, Sinks.Empty<Void> renewalSent, Mono<Void> letGo, List<String> landed,
            AtomicInteger inFlight) implements Limiter {

        @Override
        public Mono<Long> renew(java.util.Collection<LimitClaim> claims) {
            return Mono.defer(() -> {
                inFlight.incrementAndGet();
                renewalSent.tryEmitEmpty();
                return letGo.then(Mono.defer(() -> real.renew(claims)))
                        .doOnNext(missing -> landed.add("renewed"))
                        .doFinally(signal -> inFlight.decrementAndGet());
            });
        }

        @Override
        public Mono<Void> credit(java.util.Collection<LimitClaim> claims) {
            return real.credit(claims).doOnSuccess(done -> landed.add("credited"));
        }

        @Override
        public boolean admitsInPick() {
            return real.admitsInPick();
        }

        @Override
        public Mono<Set<Long>> admit(List<LimitClaim> claims) {
            return real.admit(claims);
        }

        @Override
        public Mono<Boolean> draw(LimitClaim claim) {
            return real.draw(claim);
        }

        @Override
        public Mono<Boolean> acquireSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
                Duration lease) {
            return real.acquireSlots(holder, gate, key, shard, slots, lease);
        }

        @Override
        public Mono<Boolean> renewSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
                Duration lease) {
            return real.renewSlots(holder, gate, key, shard, slots, lease);
        }

        @Override
        public Mono<Void> releaseSlots(String holder, Limits.Gate gate, String key, int shard, int slots) {
            return real.releaseSlots(holder, gate, key, shard, slots);
        }

        @Override
        public Mono<Long> sweepPermits(int counters, Duration timeout) {
            return real.sweepPermits(counters, timeout);
        }

        @Override
        public Mono<List<dev.durable.limit.PermitSlots>> permitSlots(int max) {
            return real.permitSlots(max);
        }

        @Override
        public Mono<Boolean> takeWindow(Limits.Window window, String partition, int weight) {
            return real.takeWindow(window, partition, weight);
        }

        @Override
        public Mono<Long> reconcile() {
            return real.reconcile();
        }

        @Override
        public Mono<Void> close() {
            return real.close();
        }
    }
}
