package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/** Leases at work: the reaper, the startup reclaim, graceful shutdown, several nodes. */
@ExtendWith(PostgresExtension.class)
class RecoveryIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private static JobDefinition<String, String> noop(String queue) {
        return JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue(queue);
    }

    private static QueueOptions queue(String name, int concurrency, int prefetch) {
        return QueueOptions.builder(name).concurrency(concurrency).prefetch(prefetch)
                .pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200)).build();
    }

    @Test
    void aFailedStartCanBeTriedAgain() {
        String schema = db.schema() + "_late";
        // No migrations and no tables yet: the start fails (its reclaim finds no table).
        DurableEngine engine = engines.build(engines.options("late").schema(schema).applyMigrations(false)
                .queue(queue("late", 2, 0)), noop("late"));
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> engine.start().block())
                .isInstanceOf(DurableDatabaseException.class);
        try {
            // The tables arrive (Flyway, say), and the same engine starts and runs work.
            DurableEngine migrator = engines.build(engines.options("migrator").schema(schema));
            migrator.migrate().block();
            engine.start().block();
            long id = engine.insert(JobRequest.of("noop", "finally")).block();
            assertThat(engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT).status()).isEqualTo(InstanceStatus.DONE);
            engine.closeLater().block();
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> engine.start().block())
                    .isInstanceOf(EngineClosedException.class).hasMessageContaining("is closed");
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> engine.insert(JobRequest.of("noop", "late")).block())
                    .isInstanceOf(EngineClosedException.class);
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> engine.get(id).block())
                    .isInstanceOf(EngineClosedException.class);
        } finally {
            Sql.update(db, "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        }
    }

    @Test
    void theReaperReturnsExpiredLeasesAndFailsThoseOutOfAttempts() {
        DurableEngine engine = engines.start(engines.options("reaper").queue(queue("reaped", 2, 0)), noop("reaped"));
        long again = engine.insert(JobRequest.of("noop", "again").runIn(Duration.ofHours(1))).block();
        long spent = engine.insert(JobRequest.of("noop", "spent").maxAttempts(1).runIn(Duration.ofHours(1))).block();
        // As a worker that died mid-run would leave them: executing, claimed, the lease run out.
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'dead-worker',"
                + " attempt = 1, lease_expires_at = now() - interval '1 second', eligible_at = now() WHERE id IN ($1, $2)",
                again, spent);

        Instance done = engines.awaitStatus(engine, again, InstanceStatus.DONE, WAIT);
        assertThat(done.attempt()).isEqualTo(2);
        assertThat(done.lastError()).isEqualTo("worker dead-worker lost: its lease expired on attempt 1 of 20");
        Instance failed = engines.awaitStatus(engine, spent, InstanceStatus.FAILED, WAIT);
        assertThat(failed.lastError()).isEqualTo("worker dead-worker lost: its lease expired on attempt 1 of 1");
        assertThat(engine.maintenance().orElseThrow().stats().reaped()).isGreaterThanOrEqualTo(2);
    }

    @Test
    void aRestartedEngineReclaimsItsDeadPredecessorsRowsAtOnceButNeverALiveOwners() {
        SchedulerIT.GatedJob job = new SchedulerIT.GatedJob();
        // Leases of 60 s: only the startup reclaim, not the reaper, can return these rows in time.
        DurableEngine first = engines.start(engines.options("node").leaseTtl(Duration.ofSeconds(60))
                .heartbeatInterval(Duration.ofSeconds(1)).runMaintenance(false)
                .queue(QueueOptions.builder("reclaim").concurrency(3).drainTimeout(Duration.ZERO).build()),
                job.definition("gated", "reclaim"));
        first.insertAll(List.of(JobRequest.of("gated", "a"), JobRequest.of("gated", "b"), JobRequest.of("gated", "c")))
                .block();
        Eventually.until("three running", WAIT, () -> job.started.get() == 3);
        String deadWorker = first.queueStats().get(0).worker();
        first.closeLater().block(); // drain timeout 0: the runs are abandoned with their rows claimed
        assertThat(Sql.count(db, "queue = 'reclaim' AND status = 'executing'")).isEqualTo(3);
        // The dead incarnation stopped beating two heartbeats ago.
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() + interval '55 seconds'"
                + " WHERE queue = 'reclaim'");

        // A live owner with the same identity prefix (another incarnation), freshly beaten.
        DurableEngine producer = engines.start(engines.options("producer"), noop("reclaim"));
        long live = producer.insert(JobRequest.of("noop", "live").queue("reclaim")).block();
        String liveOwner = deadWorker.substring(0, deadWorker.lastIndexOf('-') + 1) + "live";
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = $1, attempt = 1,"
                + " lease_expires_at = now() + interval '60 seconds' WHERE id = $2", liveOwner, live);

        SchedulerIT.GatedJob second = new SchedulerIT.GatedJob();
        second.open();
        DurableEngine restarted = engines.start(engines.options("node").leaseTtl(Duration.ofSeconds(60))
                .heartbeatInterval(Duration.ofSeconds(1)).runMaintenance(false)
                .queue(QueueOptions.builder("reclaim").concurrency(3).build()), second.definition("gated", "reclaim"));
        assertThat(restarted.queueStats().get(0).reclaimed()).isEqualTo(3);
        Eventually.until("reclaimed rows done", WAIT, () -> Sql.count(db, "queue = 'reclaim' AND status = 'done'") == 3);
        Instance untouched = producer.get(live).block();
        assertThat(untouched.status()).isEqualTo(InstanceStatus.EXECUTING);
        assertThat(untouched.claimedBy()).isEqualTo(liveOwner);
    }

    @Test
    void closeReleasesBufferedRowsAtOnceAndDrainsRunningOnes() {
        SchedulerIT.GatedJob job = new SchedulerIT.GatedJob();
        DurableEngine engine = engines.start(engines.options("closing")
                .queue(QueueOptions.builder("drain").concurrency(1).prefetch(4).drainTimeout(Duration.ofSeconds(20))
                        .pollInterval(Duration.ofMillis(50)).build()), job.definition("gated", "drain"));
        List<Long> ids = engine.insertAll(List.of(JobRequest.of("gated", "1"), JobRequest.of("gated", "2"),
                JobRequest.of("gated", "3"), JobRequest.of("gated", "4"), JobRequest.of("gated", "5"))).block();
        Eventually.until("one running, four buffered", WAIT,
                () -> job.started.get() == 1 && Sql.count(db, "queue = 'drain' AND status = 'executing'") == 5);

        var closed = engine.closeLater().toFuture();
        Eventually.until("buffered rows back to runnable", WAIT,
                () -> Sql.count(db, "queue = 'drain' AND status = 'runnable' AND attempt = 0 AND claimed_by IS NULL") == 4);
        assertThat(closed).isNotDone(); // still draining the running one
        job.open();
        closed.join();
        assertThat(Sql.count(db, "queue = 'drain' AND status = 'done'")).isEqualTo(1);
        assertThat(Sql.count(db, "queue = 'drain' AND status = 'runnable'")).isEqualTo(4);
        assertThat(engine.queueStats().get(0).released()).isEqualTo(4);
        assertThat(ids).hasSize(5);
    }

    @Test
    void aRunPastTheDrainTimeoutIsLeftToTheReaper() {
        AtomicInteger started = new AtomicInteger();
        JobDefinition<String, String> hangs = JobDefinition.of("hangs", String.class, (String s) -> Mono.<String>never()
                        .doOnSubscribe(subscription -> started.incrementAndGet()))
                .queue("stuck").maxAttempts(2);
        DurableEngine engine = engines.start(engines.options("impatient")
                .queue(QueueOptions.builder("stuck").drainTimeout(Duration.ofMillis(200)).build()), hangs);
        long id = engine.insert(JobRequest.of("hangs", "x")).block();
        // Running, not only claimed: a claimed row still in the buffer would be released, not abandoned.
        Eventually.until("running", WAIT, () -> started.get() == 1);
        long closing = System.nanoTime();
        engine.closeLater().block();
        assertThat(Duration.ofNanos(System.nanoTime() - closing)).isLessThan(Duration.ofSeconds(10));
        assertThat(engine.queueStats().get(0).drainAbandoned()).isEqualTo(1);

        // Another node's reaper returns it once the lease runs out; its second attempt also hangs.
        DurableEngine other = engines.start(engines.options("other").queue(
                QueueOptions.builder("stuck").drainTimeout(Duration.ZERO).build()),
                hangs.timeout(Duration.ofMillis(100)));
        Instance failed = engines.awaitStatus(other, id, InstanceStatus.FAILED, WAIT);
        assertThat(failed.attempt()).isEqualTo(2);
    }

    @Test
    void severalEnginesShareTheWorkAndNoRowRunsTwiceAtOnce() {
        Map<String, AtomicInteger> active = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> executions = new ConcurrentHashMap<>();
        AtomicInteger overlaps = new AtomicInteger();
        Map<String, AtomicInteger> perEngine = new ConcurrentHashMap<>();
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            String node = "share" + n;
            JobDefinition<String, String> tracked = JobDefinition.of("tracked", String.class, (String key) -> Mono.defer(() -> {
                        executions.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                        perEngine.computeIfAbsent(node, k -> new AtomicInteger()).incrementAndGet();
                        if (active.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet() > 1) {
                            overlaps.incrementAndGet();
                        }
                        return Mono.delay(Duration.ofMillis(2)).thenReturn(key);
                    })
                    .doFinally(signal -> active.get(key).decrementAndGet()))
                    .queue("shared");
            nodes.add(engines.start(engines.options(node).queue(queue("shared", 8, 8)), tracked));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            requests.add(JobRequest.of("tracked", "job-" + i));
        }
        nodes.get(1).insertAll(requests).block();
        Eventually.until("all done", Duration.ofSeconds(60), () -> Sql.count(db, "queue = 'shared' AND status = 'done'") == 600);
        assertThat(overlaps.get()).isZero();
        assertThat(executions).hasSize(600).allSatisfy((key, count) -> assertThat(count.get()).isEqualTo(1));
        assertThat(perEngine).as("work per engine").hasSize(3);
    }
}
