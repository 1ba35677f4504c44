package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.admin.GateUsage;
import dev.durable.internal.Db;
import dev.durable.internal.sql.LimiterSql;
import dev.durable.internal.sql.MaintenanceSql;
import dev.durable.internal.sql.Tables;
import dev.durable.limit.EngineLimits;
import dev.durable.limit.Permit;
import dev.durable.limit.PermitTimeoutException;
import dev.durable.limit.UnknownLimitException;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestClock;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** engine.limits(): permits outside jobs from the PostgreSQL limiter, sharing the gates with the jobs (issue 21). */
@ExtendWith(PostgresExtension.class)
class PermitsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final double TRICKLE = 0.001;

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private static QueueOptions queue(String name) {
        return QueueOptions.builder(name).pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200))
                .build();
    }

    private DurableEngine engine(String name, JobDefinition<?, ?>... jobs) {
        return engines.start(engines.options(name).gate("api", 2).gate("wide", 6, 3).rateLimit("quota", TRICKLE, 3)
                .window("hourly", 5, Duration.ofHours(1)).window("brief", 2, Duration.ofMillis(400))
                .queue(queue(name)), jobs);
    }

    @Test
    void gatePermitsAndJobsShareTheGateAndTheAdminSeesThePermits() {
        AtomicInteger ran = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("shared", String.class, (String s) -> {
            ran.incrementAndGet();
            return Mono.just(s);
        }).queue("permits");
        DurableEngine engine = engine("permits", job);
        EngineLimits limits = engine.limits();

        Permit first = limits.tryAcquire("api", "tenant-1", 1).block(WAIT).orElseThrow();
        Permit second = limits.tryAcquire("api", "tenant-1", 1).block(WAIT).orElseThrow();
        assertThat(limits.tryAcquire("api", "tenant-1", 1).block(WAIT)).isEmpty();
        // Another key of the same gate has its own slots.
        assertThat(limits.tryAcquire("api", "tenant-2", 2).block(WAIT)).isPresent();
        assertThat(first.holdsSlots()).isTrue();

        assertThat(engine.admin().limits().block(WAIT).gates()).contains(new GateUsage("api", "tenant-1", 2, 2));

        // A job of the same gate and key waits for a permit to go.
        long id = engine.insert(JobRequest.of("shared", "x").gate("api", "tenant-1")).block(WAIT);
        long picks = engine.queueStats("permits").orElseThrow().picks();
        Eventually.until("a few picks", WAIT, () -> engine.queueStats("permits").orElseThrow().picks() >= picks + 3);
        assertThat(ran.get()).isZero();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);

        first.release().block(WAIT);
        first.release().block(WAIT); // idempotent: the other permit's slot stays held
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(Sql.query(db, "SELECT held FROM {schema}.durable_gate_slots WHERE gate = 'api' AND key = 'tenant-1'",
                row -> row.get(0, Integer.class))).containsExactly(1);
        second.release().block(WAIT);
        assertThat(Sql.query(db, "SELECT held FROM {schema}.durable_gate_slots WHERE gate = 'api' AND key = 'tenant-1'",
                row -> row.get(0, Integer.class))).containsExactly(0);
    }

    @Test
    void acquireWaitsForAReleaseAndTimesOutWhenNoneComes() {
        DurableEngine engine = engine("waits");
        EngineLimits limits = engine.limits();
        Permit a = limits.tryAcquire("api", "k", 2).block(WAIT).orElseThrow();

        StepVerifier.create(limits.acquire("api", "k", 1, Duration.ofMillis(300), Duration.ofSeconds(30)))
                .expectError(PermitTimeoutException.class)
                .verify(WAIT);

        Mono<Permit> waiting = limits.acquire("api", "k", 1, WAIT, Duration.ofSeconds(30)).cache();
        waiting.subscribe(null, error -> { });
        a.release().delaySubscription(Duration.ofMillis(200)).block(WAIT);
        Permit granted = waiting.block(WAIT);
        assertThat(granted.limit()).isEqualTo("api");
        assertThat(granted.weight()).isEqualTo(1);
        granted.release().block(WAIT);
    }

    @Test
    void aPermitWhoseLeaseEndedFreesItsSlotsAndCannotBeRenewed() {
        DurableEngine engine = engine("leases");
        EngineLimits limits = engine.limits();
        Permit crashed = limits.tryAcquire("api", "lease-k", 2, Duration.ofMillis(200)).block(WAIT).orElseThrow();
        Permit renewed = limits.tryAcquire("api", "other", 1, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        assertThat(renewed.renew().block(WAIT)).isTrue();

        // The holder never renews nor releases: its slots come free when the lease ends.
        Optional<Permit> after = Eventually.until("the expired permit's slots free", WAIT,
                () -> limits.tryAcquire("api", "lease-k", 2).block(WAIT), Optional::isPresent);
        assertThat(crashed.renew().block(WAIT)).isFalse();
        after.orElseThrow().release().block(WAIT);
        assertThat(Sql.query(db, "SELECT key FROM {schema}.durable_limit_permits WHERE gate = 'api' AND key IN ('lease-k', 'other')",
                row -> row.get(0, String.class))).containsExactly("other");
    }

    @Test
    void permitsReleasedAndRenewedWhileOthersAcquireSweepAndReconcileNeverDeadlock() {
        DurableEngine engine = engine("locks");
        EngineLimits limits = engine.limits();
        Maintenance maintenance = engine.maintenance().orElseThrow();
        LimiterSql sql = new LimiterSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        // One counter, every permit path on it at once: acquires that count expired permits off, renewals
        // and releases, the sweep and the reconcile. Each locks the counter first, so none waits on another
        // in a cycle; a lock conflict left over would be retried inside, never seen here.
        List<String> done = Flux.range(0, 240)
                .flatMap(i -> switch (i % 6) {
                    case 0 -> maintenance.reconcileLimits().thenReturn("reconciled");
                    case 1 -> sql.sweepPermits(10, WAIT).thenReturn("swept");
                    case 2 -> limits.tryAcquire("api", "hot", 1, Duration.ofMillis(1)).thenReturn("expiring");
                    default -> limits.acquire("api", "hot", 1, WAIT, Duration.ofSeconds(30))
                            .flatMap(permit -> permit.renew().then(permit.release()).thenReturn("released"));
                }, 24)
                .collectList().block(WAIT);
        assertThat(done).hasSize(240).contains("released", "reconciled", "swept", "expiring");

        // What is left counts exactly: the live permits' slots, and the whole gate once they are gone.
        sql.sweepPermits(100, WAIT).block(WAIT);
        assertThat(Sql.query(db, "SELECT s.held - coalesce((SELECT sum(p.slots) FROM {schema}.durable_limit_permits p"
                + " WHERE p.gate = s.gate AND p.key = s.key AND p.shard = s.shard), 0)::int"
                + " FROM {schema}.durable_gate_slots s WHERE s.gate = 'api' AND s.key = 'hot'",
                row -> row.get(0, Integer.class))).containsExactly(0);
        Permit whole = Eventually.until("the expired permits counted off", WAIT,
                () -> limits.tryAcquire("api", "hot", 2).block(WAIT), Optional::isPresent).orElseThrow();
        whole.release().block(WAIT);
    }

    @Test
    void anExpiredPermitStopsHoldingTheGatesJobsBackWithoutTheReconcile() {
        AtomicInteger ran = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("held-back", String.class, (String s) -> {
            ran.incrementAndGet();
            return Mono.just(s);
        }).queue("expiry");
        // The reconcile never runs here; the sweep ticks often.
        DurableEngine engine = engines.start(engines.options("expiry").gate("api", 2)
                .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .bucketSweeper(Maintenance.TaskOptions.every(Duration.ofMillis(100)))
                .queue(queue("expiry")), job);
        EngineLimits limits = engine.limits();

        // A caller that crashed: its permit is never renewed nor released, and nothing else acquires.
        limits.tryAcquire("api", "crashed", 2, Duration.ofMillis(300)).block(WAIT).orElseThrow();
        long id = engine.insert(JobRequest.of("held-back", "x").gate("api", "crashed")).block(WAIT);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(ran.get()).isEqualTo(1);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_limit_permits WHERE key = 'crashed'",
                row -> row.get(0, Long.class))).containsExactly(0L);
    }

    @Test
    void aRenewalThatFindsThePermitExpiredCountsItsSlotsOffAtOnce() {
        DurableEngine engine = engines.start(engines.options("renewal").gate("api", 2)
                .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .bucketSweeper(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .queue(queue("renewal")));
        EngineLimits limits = engine.limits();
        Permit late = limits.tryAcquire("api", "late", 2, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        Sql.update(db, "UPDATE {schema}.durable_limit_permits SET expires_at = now() - interval '1 second'"
                + " WHERE key = 'late'");

        assertThat(late.renew().block(WAIT)).isFalse();
        assertThat(Sql.query(db, "SELECT held FROM {schema}.durable_gate_slots WHERE gate = 'api' AND key = 'late'",
                row -> row.get(0, Integer.class))).containsExactly(0);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_limit_permits WHERE key = 'late'",
                row -> row.get(0, Long.class))).containsExactly(0L);
        late.release().block(WAIT); // nothing left to give back
    }

    @Test
    void twoHundredWaitingAcquiresLeaveTheEnginesJobsRunningAndAllGetTheirTurn() {
        AtomicInteger runs = new AtomicInteger();
        // Each run outlives its lease (3 s): it only finishes when heartbeats still get connections.
        JobDefinition<String, String> slow = JobDefinition.of("slow", String.class, (String s) -> {
            runs.incrementAndGet();
            return Mono.delay(Duration.ofSeconds(4)).thenReturn(s);
        }).queue("crowd");
        DurableEngine engine = engines.start(engines.options("crowd").gate("one", 1).queue(queue("crowd")), slow);
        EngineLimits limits = engine.limits();
        Permit held = limits.tryAcquire("one", "k", 1).block(WAIT).orElseThrow();

        Duration crowdWait = Duration.ofMinutes(5);
        AtomicInteger granted = new AtomicInteger();
        Mono<List<Boolean>> crowd = Flux.range(0, 200)
                .flatMap(i -> limits.acquire("one", "k", 1, crowdWait, Duration.ofSeconds(30))
                        .flatMap(permit -> {
                            granted.incrementAndGet();
                            return permit.release().thenReturn(true);
                        }), 200)
                .collectList()
                .cache();
        crowd.subscribe(null, error -> { });

        List<Long> ids = Flux.range(0, 8).concatMap(i -> engine.insert(JobRequest.of("slow", "job-" + i))).collectList()
                .block(WAIT);
        for (long id : ids) {
            assertThat(engines.awaitSettled(engine, id, Duration.ofMinutes(2)).status()).isEqualTo(InstanceStatus.DONE);
        }
        assertThat(runs.get()).isEqualTo(8); // no lease lost, no run repeated
        assertThat(granted.get()).isZero();

        held.release().block(WAIT);
        assertThat(crowd.block(crowdWait)).hasSize(200);
        assertThat(granted.get()).isEqualTo(200);
        assertThat(Sql.query(db, "SELECT coalesce(sum(held), 0)::int FROM {schema}.durable_gate_slots WHERE gate = 'one'",
                row -> row.get(0, Integer.class))).containsExactly(0);
    }

    @Test
    void theReconcileCountsLivePermitsAndDropsExpiredOnes() {
        DurableEngine engine = engine("reconcile");
        EngineLimits limits = engine.limits();
        limits.tryAcquire("api", "live", 1, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        limits.tryAcquire("api", "gone", 2, Duration.ofMillis(100)).block(WAIT).orElseThrow();
        Sql.update(db, "UPDATE {schema}.durable_limit_permits SET expires_at = now() - interval '1 second'"
                + " WHERE key = 'gone'");
        engine.maintenance().orElseThrow().reconcileLimits().block(WAIT);
        assertThat(Sql.query(db, "SELECT key || '=' || held FROM {schema}.durable_gate_slots"
                + " WHERE gate = 'api' AND key IN ('live', 'gone')", row -> row.get(0, String.class))).containsExactly("live=1");
        assertThat(Sql.query(db, "SELECT key FROM {schema}.durable_limit_permits WHERE key IN ('live', 'gone')",
                row -> row.get(0, String.class))).containsExactly("live");
    }

    @Test
    void rateLimitPermitsSpendTokensAndShardedGatesGrantTheirWholeCapacity() {
        DurableEngine engine = engine("tokens");
        EngineLimits limits = engine.limits();
        Permit two = limits.tryAcquire("quota", "tenant", 2).block(WAIT).orElseThrow();
        assertThat(two.holdsSlots()).isFalse();
        assertThat(limits.tryAcquire("quota", "tenant", 2).block(WAIT)).isEmpty();
        assertThat(limits.tryAcquire("quota", "tenant", 1).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("quota", "other-tenant", 3).block(WAIT)).isPresent();
        StepVerifier.create(limits.acquire("quota", "tenant", 1, Duration.ofMillis(300), Duration.ofSeconds(1)))
                .expectError(PermitTimeoutException.class).verify(WAIT);

        // Six slots on three shards of two: acquire tries the shards until all six are held.
        for (int i = 0; i < 6; i++) {
            assertThat(limits.acquire("wide", "k", 1).block(WAIT)).isNotNull();
        }
        assertThat(Sql.query(db, "SELECT sum(held)::int FROM {schema}.durable_gate_slots WHERE gate = 'wide'",
                row -> row.get(0, Integer.class))).containsExactly(6);
        StepVerifier.create(limits.acquire("wide", "k", 1, Duration.ofMillis(300), Duration.ofSeconds(1)))
                .expectError(PermitTimeoutException.class).verify(WAIT);
    }

    @Test
    void badRequestsAreTypedErrors() {
        DurableEngine engine = engine("errors");
        EngineLimits limits = engine.limits();
        StepVerifier.create(limits.tryAcquire("nope", "k", 1)).expectError(UnknownLimitException.class).verify(WAIT);
        StepVerifier.create(limits.acquire("nope", "k", 1)).expectError(UnknownLimitException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("api", "k", 0)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("api", "k", 3)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("wide", "k", 3)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("quota", "k", 4)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("api", "k", 1, Duration.ZERO))
                .expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(engines.build(engines.options("unstarted").gate("api", 1)).limits().tryAcquire("api", "k", 1))
                .expectError(EngineClosedException.class).verify(WAIT);
    }

    @Test
    void windowPermitsAdmitAtMostTheLimitPerWindowEvenWhenAskedAtOnceAndSlide() {
        DurableEngine engine = engine("windows");
        EngineLimits limits = engine.limits();
        List<Optional<Permit>> answers = Flux.range(0, 20)
                .flatMap(i -> limits.tryAcquire("hourly", "tenant-a", 1), 20)
                .collectList().block(WAIT);
        assertThat(answers.stream().filter(Optional::isPresent).count()).isEqualTo(5);
        assertThat(limits.tryAcquire("hourly", "tenant-b", 5).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("hourly", "tenant-b", 1).block(WAIT)).isEmpty();
        StepVerifier.create(limits.tryAcquire("hourly", "tenant-c", 6)).expectError(InvalidRequestException.class)
                .verify(WAIT);

        // A short window on the server's clock: what it admitted slides out, so a wait ends with a permit.
        assertThat(limits.tryAcquire("brief", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.acquire("brief", "p", 2, WAIT, Duration.ofSeconds(1)).block(WAIT).holdsSlots()).isFalse();
    }

    @Test
    void aWindowIsFullUntilItsLengthHasPassedOnTheDatabasesClock() {
        TestClock clock = TestClock.on(db);
        DurableEngine engine = engines.start(clock.engineOptions().name("clocked")
                .window("hour", 2, Duration.ofHours(1)).queue(queue("clocked")));
        EngineLimits limits = engine.limits();
        assertThat(limits.tryAcquire("hour", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("hour", "p", 1).block(WAIT)).isEmpty();
        clock.advance(Duration.ofMinutes(30));
        assertThat(limits.tryAcquire("hour", "p", 1).block(WAIT)).isEmpty();
        // Past the window and its partly counted oldest slot.
        clock.advance(Duration.ofMinutes(60));
        assertThat(limits.tryAcquire("hour", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("hour", "p", 1).block(WAIT)).isEmpty();
    }

    @Test
    void aTryOnAShardedGateTriesEveryShardBeforeRefusing() {
        DurableEngine engine = engines.start(engines.options("shards").gate("spread", 6, 3)
                .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .queue(queue("shards")));
        EngineLimits limits = engine.limits();
        // Three shards of two; two of them full (as if jobs held them), one free.
        Sql.update(db, "INSERT INTO {schema}.durable_gate_slots (gate, key, shard, capacity, held, admitted)"
                + " VALUES ('spread', 'sharded', 0, 2, 2, 0), ('spread', 'sharded', 1, 2, 2, 0)");
        // Whichever shard a try starts on, it goes on to the free one: both free slots are granted at once.
        for (int i = 0; i < 2; i++) {
            assertThat(limits.tryAcquire("spread", "sharded", 1).block(WAIT)).as("try " + i).isPresent();
        }
        assertThat(limits.tryAcquire("spread", "sharded", 1).block(WAIT)).isEmpty();
        assertThat(Sql.query(db, "SELECT shard || '=' || held FROM {schema}.durable_gate_slots WHERE gate = 'spread' AND key = 'sharded'"
                + " ORDER BY shard", row -> row.get(0, String.class))).containsExactly("0=2", "1=2", "2=2");
    }

    @Test
    void theSweepDeletesWindowsThatCountNothingAnyMore() {
        DurableEngine engine = engine("sweep");
        engine.limits().tryAcquire("brief", "swept", 1).block(WAIT).orElseThrow();
        engine.limits().tryAcquire("hourly", "kept", 1).block(WAIT).orElseThrow();
        MaintenanceSql sql = new MaintenanceSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        Eventually.until("the brief window's row swept", WAIT, () -> {
            sql.sweepWindows(100, WAIT).block(WAIT);
            return Sql.query(db, "SELECT count(*) FROM {schema}.durable_window_counters WHERE partition_key = 'swept'",
                    row -> row.get(0, Long.class)).get(0) == 0;
        });
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_window_counters WHERE partition_key = 'kept'",
                row -> row.get(0, Long.class))).containsExactly(1L);
    }
}
