package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Maintenance against the real database: the reaper's backoff and woken parents (issue 15), passes
 * that keep taking batches while they come back full and tasks that fail alone (issue 16), the sweep
 * of idle rate-limit buckets, GC's meter and the per-task switches and sizes (issue 17).
 */
@ExtendWith(PostgresExtension.class)
class MaintenanceIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
        // One schema per class: each test starts from empty tables (once the first engine made them).
        Sql.update(db, "DO $$ BEGIN IF to_regclass('{schema}.durable_instances') IS NOT NULL THEN"
                + " TRUNCATE {schema}.durable_instances, {schema}.durable_signals, {schema}.durable_rate_buckets;"
                + " END IF; END $$");
    }

    /** As a worker that died mid-run leaves a row: executing, claimed, its lease run out. */
    private void loseLease(long id, int attempt) {
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'dead-worker',"
                + " attempt = $2, lease_expires_at = now() - interval '1 second' WHERE id = $1", id, attempt);
    }

    /** {@code count} settled rows of queue {@code queue}, settled two hours ago. */
    private void oldSettledRows(String queue, int count) {
        Sql.update(db, "INSERT INTO {schema}.durable_history (id, type, type_version, queue, priority, status, step,"
                + " attempt, max_attempts, eligible_at, inserted_at, settled_at)"
                + " SELECT nextval(pg_get_serial_sequence('{schema}.durable_instances', 'id')), 'noop', 1, $1, 0,"
                + " 'done', 'run', 1, 1, now(), now(), now() - interval '2 hours' FROM generate_series(1, $2)",
                queue, count);
    }

    private static JobDefinition<String, String> noop(String queue) {
        return JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue(queue);
    }

    private static String text(io.r2dbc.spi.Row row, String column) {
        return row.get(column, String.class);
    }

    // ---- issue 15: the reaper with backoff ----------------------------------------------------

    @Test
    void aReapedRowIsDueAfterItsTypesBackoffForTheLostAttemptAndItsErrorNamesTheLostWorker() {
        JobDefinition<String, String> slow = JobDefinition.of("slow", String.class, (String s) -> Mono.just(s))
                .queue("reaped").backoff(Backoff.exponential(Duration.ofMinutes(1), Duration.ofHours(1)));
        // No queue runs here: nothing picks the recovered rows while the test looks at them.
        DurableEngine engine = engines.start(engines.options("backoff").runMaintenance(false), slow);
        long known = engine.insert(JobRequest.of("slow", "k")).block();
        long stranger = engine.insert(JobRequest.of("slow", "s")).block();
        // A type this node does not know (deployed on other nodes only): the default backoff applies.
        Sql.update(db, "UPDATE {schema}.durable_instances SET type = 'stranger' WHERE id = $1", stranger);
        loseLease(known, 2);
        loseLease(stranger, 3);

        assertThat(engine.maintenance().orElseThrow().reap().block()).isEqualTo(2);

        // Both times from the database clock: the reaper wrote eligible_at and updated_at together.
        List<String> rows = Sql.query(db, "SELECT status || ' ' || (extract(epoch FROM eligible_at - updated_at) * 1000)::bigint"
                + " || ' ' || (eligible_at > now()) || ' ' || last_error AS r FROM {schema}.durable_instances"
                + " WHERE id IN ($1, $2) ORDER BY id", row -> text(row, "r"), known, stranger);
        assertThat(rows).containsExactly(
                "runnable 120000 true worker dead-worker lost: its lease expired on attempt 2 of 20",
                "runnable 4000 true worker dead-worker lost: its lease expired on attempt 3 of 20");
        assertThat(engine.maintenance().orElseThrow().stats().reaped()).isEqualTo(2);
    }

    @Test
    void aParentWhoseLastChildIsReapedToFailedRunsItsJoinWithoutWaitingForAPoll() {
        AtomicInteger started = new AtomicInteger();
        JobDefinition<String, String> hangs = JobDefinition.of("hangs", String.class, (String s) -> Mono.<String>never()
                        .doOnSubscribe(subscription -> started.incrementAndGet()))
                .queue("kids").maxAttempts(1);
        WorkflowDefinition<String> parent = WorkflowDefinition.builder("parent", String.class).queue("parents")
                .step("fan", ctx -> Mono.just(Outcome.spawnChildren(List.of(JobRequest.of("hangs", "c")), "join",
                        ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done(ctx.children().get(0).status() + ": "
                        + ctx.children().get(0).lastError())))
                .build();
        DurableEngine first = engines.start(engines.options("first").runMaintenance(false)
                .queue(QueueOptions.builder("parents").pollInterval(Duration.ofMillis(50)).build())
                .queue(QueueOptions.builder("kids").pollInterval(Duration.ofMillis(50)).drainTimeout(Duration.ZERO)
                        .build()), parent, hangs);
        long id = first.insert(JobRequest.of("parent", "p")).block();
        // Running, not only claimed: a claimed row still in the buffer would be released at close.
        Eventually.until("the child running", WAIT, () -> started.get() == 1);
        first.closeLater().block(); // drain timeout 0: the child's run is abandoned with its row claimed
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() - interval '1 second'"
                + " WHERE type = 'hangs'");
        assertThat(Sql.count(db, "type = 'parent' AND status = 'awaiting_children'")).isEqualTo(1);

        // Polls ten minutes apart: only a poke runs the parent's join within the wait.
        DurableEngine second = engines.start(engines.options("second")
                .queue(QueueOptions.builder("parents").pollInterval(Duration.ofMinutes(10))
                        .maxPollInterval(Duration.ofMinutes(10)).build()), parent, hangs);
        Instance done = engines.awaitStatus(second, id, InstanceStatus.DONE, WAIT);
        assertThat(second.codec().decode(done.resultJson(), String.class))
                .startsWith("FAILED: worker ").contains(" lost: its lease expired on attempt 1 of 1");
    }

    // ---- issue 16: passes that keep up, tasks that fail alone ------------------------------------

    @Test
    void aPassTakesBatchesWhileTheyComeBackFullWithinItsBudget() {
        DurableEngine engine = engines.start(engines.options("keeps-up").runMaintenance(false)
                .retention(Duration.ofHours(1))
                .garbageCollector(TaskOptions.every(Duration.ofHours(1)).withBatchSize(100)), noop("gc"));
        oldSettledRows("gc", 250);
        // Three batches (100, 100, 50): the last one not full ends the pass.
        assertThat(engine.maintenance().orElseThrow().collectGarbage().block()).isEqualTo(250);
        assertThat(Sql.count(db, "queue = 'gc'")).isZero();

        DurableEngine hurried = engines.start(engines.options("hurried").runMaintenance(false)
                .retention(Duration.ofHours(1))
                .garbageCollector(TaskOptions.every(Duration.ofHours(1)).withBatchSize(100)
                        .withBudget(Duration.ofMillis(1))), noop("gc"));
        oldSettledRows("gc", 250);
        // The budget is spent after the first batch, full or not: the next pass goes on.
        assertThat(hurried.maintenance().orElseThrow().collectGarbage().block()).isEqualTo(100);
        assertThat(hurried.maintenance().orElseThrow().collectGarbage().block()).isEqualTo(100);
        assertThat(hurried.maintenance().orElseThrow().stats().collected()).isEqualTo(200);
    }

    @Test
    void aStalledTaskTimesOutAloneWhileTheOtherTasksKeepTheirTicks() {
        DurableEngine engine = engines.start(engines.options("isolated").retention(Duration.ofHours(1))
                .reaper(TaskOptions.every(Duration.ofMillis(200)))
                .garbageCollector(TaskOptions.every(Duration.ofMillis(200)).withTimeout(Duration.ofMillis(500))),
                noop("stall"));
        // Every GC batch stalls on a history row's delete (as on a table locked by someone else);
        // the reaper never deletes history rows.
        db.execute("CREATE FUNCTION \"" + db.schema() + "\".stall_gc() RETURNS trigger LANGUAGE plpgsql AS $$"
                + " BEGIN PERFORM pg_sleep(5); RETURN OLD; END $$");
        db.execute("CREATE TRIGGER stall_gc BEFORE DELETE ON \"" + db.schema() + "\".durable_history"
                + " FOR EACH ROW EXECUTE FUNCTION \"" + db.schema() + "\".stall_gc()");
        oldSettledRows("stall", 1);
        long lost = engine.insert(JobRequest.of("noop", "lost").runIn(Duration.ofHours(1))).block();
        try {
            Maintenance maintenance = engine.maintenance().orElseThrow();
            Eventually.until("two GC passes timed out", WAIT, () -> maintenance.stats().failures() >= 2);

            loseLease(lost, 1);
            Eventually.until("the reaper still recovers", WAIT,
                    () -> Sql.count(db, "id = " + lost + " AND status = 'runnable'") == 1);
            assertThat(maintenance.stats().collected()).isZero();
        } finally {
            db.execute("DROP TRIGGER stall_gc ON \"" + db.schema() + "\".durable_history");
        }
        Eventually.until("GC once the history is free", WAIT, () -> Sql.count(db, "status = 'done'") == 0);
    }

    // ---- issue 17: idle buckets, GC's meter, per-task switches -----------------------------------

    @Test
    void bucketsFullAgainForAWhileAreSweptAndNoOthers() {
        DurableEngine engine = engines.start(engines.options("sweeper").runMaintenance(false).rateLimit("api", 10, 5)
                .queue(QueueOptions.builder("limited").pollInterval(Duration.ofMillis(50)).build()), noop("limited"));
        Sql.update(db, "INSERT INTO {schema}.durable_rate_buckets (name, partition_key, tokens, refilled_at) VALUES"
                + " ('api', 'idle', 0, now() - interval '1 hour'),"      // full again long ago: swept
                + " ('api', 'busy', 0, now()),"                          // empty now: kept
                + " ('api', 'lately', 5, now() - interval '10 seconds')," // full, but only lately: kept
                + " ('other', 'idle', 0, now() - interval '1 hour')");   // a limit this node does not know: kept
        assertThat(engine.maintenance().orElseThrow().sweepBuckets().block()).isEqualTo(1);
        assertThat(Sql.query(db, "SELECT name || '/' || partition_key AS k FROM {schema}.durable_rate_buckets ORDER BY 1",
                row -> text(row, "k"))).containsExactly("api/busy", "api/lately", "other/idle");
        assertThat(engine.maintenance().orElseThrow().stats().bucketsSwept()).isEqualTo(1);

        // The partition whose bucket went admits as a full bucket would: its job runs at once.
        long id = engine.insert(JobRequest.of("noop", "x").rateLimit("api", 5, "idle")).block();
        engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(Sql.query(db, "SELECT tokens::int AS t FROM {schema}.durable_rate_buckets"
                + " WHERE name = 'api' AND partition_key = 'idle'", row -> row.get("t", Integer.class))).containsExactly(0);
    }

    @Test
    void gcSweepsSignalsWhoseInstanceIsGoneAndNoOthers() {
        DurableEngine engine = engines.start(engines.options("orphans").runMaintenance(false)
                .retention(Duration.ofHours(1))
                .garbageCollector(TaskOptions.every(Duration.ofHours(1)).withBatchSize(2)), noop("orphans"));
        long live = engine.insert(JobRequest.of("noop", "later").runIn(Duration.ofHours(1))).block();
        Sql.update(db, "UPDATE {schema}.durable_instances SET has_signals = true WHERE id = $1", live);
        // Interleaved in id order: signals of the live row, and of rows gone without their triggers.
        for (long instance : new long[] {live, -1, live, -2, -3, live}) {
            Sql.update(db, "INSERT INTO {schema}.durable_signals (instance_id, name) VALUES ($1, 'x')", instance);
        }
        Maintenance maintenance = engine.maintenance().orElseThrow();
        // Each batch (one per pass here: no settled rows to take) sweeps the next two signals.
        for (int pass = 0; pass < 3; pass++) {
            maintenance.collectGarbage().block();
        }
        assertThat(Sql.query(db, "SELECT instance_id FROM {schema}.durable_signals ORDER BY id",
                row -> row.get(0, Long.class))).containsExactly(live, live, live);

        // Past the last signal the sweep starts over: one orphaned since, behind where it got to, is
        // found on the next round (a pass that finds the end, then one from the start).
        Sql.update(db, "UPDATE {schema}.durable_signals SET instance_id = -4"
                + " WHERE id = (SELECT min(id) FROM {schema}.durable_signals)");
        for (int pass = 0; pass < 2; pass++) {
            maintenance.collectGarbage().block();
        }
        assertThat(Sql.query(db, "SELECT instance_id FROM {schema}.durable_signals ORDER BY id",
                row -> row.get(0, Long.class))).containsExactly(live, live);
    }

    @Test
    void eachTaskHasItsOwnSwitchAndGcIsCounted() {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        // A node that wants the reaper but not GC.
        DurableEngine engine = engines.start(engines.options("reaper-only").meterRegistry(meters)
                .retention(Duration.ofHours(1))
                .reaper(TaskOptions.every(Duration.ofMillis(100)))
                .awaitExpiry(TaskOptions.every(Duration.ofMillis(100)).disabled())
                .garbageCollector(TaskOptions.every(Duration.ofMillis(100)).disabled()), noop("switch"));
        oldSettledRows("switch", 3);
        // Three rows lost one after another: each is recovered by a later reaper tick than the one before,
        // so the ticks went on for a while, long enough for a GC sharing them to have run.
        for (int i = 0; i < 3; i++) {
            long lost = engine.insert(JobRequest.of("noop", "lost" + i).runIn(Duration.ofHours(1))).block();
            loseLease(lost, 1);
            Eventually.until("reaped " + i, WAIT, () -> Sql.count(db, "id = " + lost + " AND status = 'runnable'") == 1);
        }
        assertThat(Sql.count(db, "queue = 'switch' AND status = 'done'")).isEqualTo(3);
        assertThat(meters.counter("durable.gc.deleted").count()).isZero();

        // Run by hand, GC still works on this node, and is counted (with any old rows other tests left).
        long collected = engine.maintenance().orElseThrow().collectGarbage().block();
        assertThat(collected).isGreaterThanOrEqualTo(3);
        assertThat(Sql.count(db, "queue = 'switch'")).isEqualTo(3); // the three reaped rows, still live
        assertThat(meters.counter("durable.gc.deleted").count()).isEqualTo((double) collected);
        assertThat(engine.options().garbageCollector().enabled()).isFalse();
        assertThat(engine.options().toString()).contains("garbageCollector=off", "reaper=every PT0.1S");

        Maintenance maintenance = engine.maintenance().orElseThrow();
        engine.closeLater().block(WAIT);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> maintenance.collectGarbage().block(WAIT))
                .isInstanceOf(EngineClosedException.class);
    }
}
