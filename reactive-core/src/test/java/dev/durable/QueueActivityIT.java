package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.admin.QueueActivity;
import dev.durable.admin.QueueDepth;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The fleet's view from the database: the outcomes every engine counts per minute, the rows due now
 * per queue, and the secrets every engine on the database shares. Each is the same whichever engine
 * reads it, and survives the engine that wrote it.
 */
@ExtendWith(PostgresExtension.class)
class QueueActivityIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final Duration HOUR = Duration.ofHours(1);
    private static final Duration MINUTE = Duration.ofMinutes(1);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private EngineOptions.Builder options(String name, String... queues) {
        EngineOptions.Builder options = engines.options(name).heartbeatInterval(Duration.ofMillis(200));
        for (String queue : queues) {
            options.queue(QueueOptions.builder(queue).pollInterval(Duration.ofMillis(100)).build());
        }
        return options;
    }

    /**
     * Two engines run the outcomes of two queues; each engine's counts reach the table, and every engine, a
     * new one after both closed included, reads the same totals per queue.
     */
    @Test
    void everyEngineCountsItsOutcomesAndEveryEngineReadsTheFleetsTotals() {
        AtomicInteger flakyCalls = new AtomicInteger();
        JobDefinition<String, String> ok = JobDefinition.of("ok", String.class, (String s) -> Mono.just(s))
                .queue("left");
        JobDefinition<String, String> doomed = JobDefinition.of("doomed", String.class,
                (String s) -> Mono.<String>error(new PermanentFailureException("no " + s))).queue("left");
        JobDefinition<String, String> flaky = JobDefinition.of("flaky", String.class,
                        (String s) -> flakyCalls.incrementAndGet() % 2 == 1
                                ? Mono.<String>error(new IllegalStateException("first try")) : Mono.just(s))
                .queue("right").backoff(Backoff.fixed(Duration.ofMillis(10)));
        DurableEngine first = engines.start(options("first", "left", "right"), ok, doomed, flaky);
        DurableEngine second = engines.start(options("second", "left", "right"), ok, doomed, flaky);

        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            ids.add((i % 2 == 0 ? first : second).insert(JobRequest.of("ok", "a" + i)).block(WAIT));
        }
        for (int i = 0; i < 3; i++) {
            ids.add(first.insert(JobRequest.of("doomed", "b" + i)).block(WAIT));
        }
        for (int i = 0; i < 4; i++) {
            ids.add(second.insert(JobRequest.of("flaky", "c" + i)).block(WAIT));
        }
        long cancelled = first.insert(JobRequest.of("ok", "later").runAt(java.time.Instant.now().plus(HOUR)))
                .block(WAIT);
        ids.forEach(id -> engines.awaitSettled(first, id, WAIT));
        first.admin().cancel(cancelled).block(WAIT);

        // completed, failed, retried, cancelled, reaped
        Map<String, List<Long>> expected = Map.of("left", List.of(10L, 3L, 0L, 1L, 0L),
                "right", List.of(4L, 0L, 4L, 0L, 0L));
        Eventually.until("both engines' counts flushed", WAIT, () -> totals(first).equals(expected));
        assertThat(totals(second)).isEqualTo(expected);
        assertThat(first.admin().activity(HOUR, MINUTE, "right").block(WAIT))
                .extracting(QueueActivity::queue).containsOnly("right");

        first.closeLater().block(WAIT);
        second.closeLater().block(WAIT);
        DurableEngine later = engines.start(options("later"));
        assertThat(totals(later)).as("after every engine that counted has closed").isEqualTo(expected);
        List<QueueActivity> buckets = later.admin().activity(HOUR, HOUR, null).block(WAIT);
        assertThat(buckets).allSatisfy(bucket -> assertThat(bucket.from().getEpochSecond() % 3600).isZero());
    }

    private static Map<String, List<Long>> totals(DurableEngine engine) {
        Map<String, List<Long>> totals = new TreeMap<>();
        for (QueueActivity minute : engine.admin().activity(HOUR, MINUTE, null).block(WAIT)) {
            totals.merge(minute.queue(), List.of(minute.completed(), minute.failed(), minute.retried(),
                    minute.cancelled(), minute.reaped()), (a, b) -> {
                        List<Long> sum = new ArrayList<>();
                        for (int i = 0; i < a.size(); i++) {
                            sum.add(a.get(i) + b.get(i));
                        }
                        return sum;
                    });
        }
        return totals;
    }

    /**
     * Counts whose flushes fail (a trigger refuses every write to the table for a while, and counts its
     * refusals in a sequence, which no rollback undoes) are kept and added by a later flush; a claim taken
     * back by the reaper counts as reaped.
     */
    @Test
    void countsOutliveFailedFlushesAndALeaseRecoveredByTheReaperIsCountedAsReaped() {
        JobDefinition<String, String> ok = JobDefinition.of("ok", String.class, (String s) -> Mono.just(s))
                .queue("reaped");
        DurableEngine engine = engines.start(options("reaper", "reaped").reaperInterval(Duration.ofMillis(100)), ok);
        String schema = "\"" + db.schema() + "\"";
        db.execute("CREATE SEQUENCE " + schema + ".refused_flushes;"
                + " CREATE FUNCTION " + schema + ".refuse_flush() RETURNS trigger LANGUAGE plpgsql AS $$"
                + " BEGIN PERFORM nextval('" + schema + ".refused_flushes'); RAISE EXCEPTION 'refused'; END $$;"
                + " CREATE TRIGGER refuse BEFORE INSERT ON " + schema + ".durable_queue_minutes"
                + " FOR EACH ROW EXECUTE FUNCTION " + schema + ".refuse_flush()");
        for (int i = 0; i < 3; i++) {
            engines.awaitSettled(engine, engine.insert(JobRequest.of("ok", "during")).block(WAIT), WAIT);
        }
        Eventually.until("two flushes refused", WAIT, () -> Sql.query(db,
                "SELECT last_value FROM {schema}.refused_flushes WHERE is_called", row -> row.get(0, Long.class))
                .stream().anyMatch(refused -> refused >= 2));
        assertThat(totals(engine)).doesNotContainKey("reaped");
        db.execute("DROP TRIGGER refuse ON " + schema + ".durable_queue_minutes");
        db.execute("INSERT INTO " + schema + ".durable_instances (type, queue, step, state, max_attempts,"
                + " status, attempt, claimed_by, lease_expires_at) VALUES ('ok', 'reaped', 'run', '\"x\"', 3,"
                + " 'executing', 1, 'gone-worker', now() - interval '1 minute')");
        Eventually.until("reaped and completed", WAIT, () -> {
            Map<String, List<Long>> totals = totals(engine);
            return List.of(4L, 0L, 0L, 0L, 1L).equals(totals.get("reaped"));
        });
    }

    /**
     * Cancels that settle rows outside a run count too: a parent cancelled with its waiting children, and
     * a claimed row a heartbeat finds cancelled in the buffer and gives back cancelled.
     */
    @Test
    void cancelsOutsideARunAreCountedACascadeAndABufferedRowGivenBack() {
        reactor.core.publisher.Sinks.Empty<Void> release = reactor.core.publisher.Sinks.empty();
        JobDefinition<String, String> slow = JobDefinition.of("slow", String.class,
                (String s) -> release.asMono().thenReturn(s)).queue("cancels");
        JobDefinition<String, String> ok = JobDefinition.of("ok", String.class, (String s) -> Mono.just(s))
                .queue("cancels");
        WorkflowDefinition<String> parent = WorkflowDefinition.builder("parent", String.class).queue("family")
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(List.of(
                        JobRequest.of("ok", "c1").queue("family").runAt(java.time.Instant.now().plus(HOUR)),
                        JobRequest.of("ok", "c2").queue("family").runAt(java.time.Instant.now().plus(HOUR))),
                        "join", ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done(ctx.state())))
                .build();
        DurableEngine engine = engines.start(engines.options("cancels").heartbeatInterval(Duration.ofMillis(200))
                .queue(QueueOptions.builder("cancels").concurrency(1).prefetch(1).pollInterval(Duration.ofMillis(100))
                        .build())
                .queue(QueueOptions.builder("family").pollInterval(Duration.ofMillis(100)).build()), slow, ok, parent);
        try {
            long family = engine.insert(JobRequest.of("parent", "p")).block(WAIT);
            engines.awaitStatus(engine, family, InstanceStatus.AWAITING_CHILDREN, WAIT);
            assertThat(engine.cancel(family, true).block(WAIT)).isEqualTo(CancelResult.CANCELLED);

            long running = engine.insert(JobRequest.of("slow", "s")).block(WAIT);
            engines.awaitStatus(engine, running, InstanceStatus.EXECUTING, WAIT);
            long buffered = engine.insert(JobRequest.of("ok", "b")).block(WAIT);
            engines.awaitStatus(engine, buffered, InstanceStatus.EXECUTING, WAIT); // claimed into the buffer
            assertThat(engine.cancel(buffered).block(WAIT)).isEqualTo(CancelResult.REQUESTED);
            engines.awaitStatus(engine, buffered, InstanceStatus.CANCELLED, WAIT);
        } finally {
            release.tryEmitEmpty();
        }
        // completed, failed, retried, cancelled, reaped
        Eventually.until("the cancels counted", WAIT, () -> List.of(0L, 0L, 0L, 3L, 0L).equals(totals(engine).get("family"))
                && List.of(1L, 0L, 0L, 1L, 0L).equals(totals(engine).get("cancels")));
    }

    /**
     * The rows due now per queue, with the wait of the oldest, from the admin and from the gauges: rows
     * scheduled ahead and rows waiting behind their key's running row are not due work.
     */
    @Test
    void theRowsDueNowAndTheOldestWaitPerQueue() {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        // Serves "served" (paused, so its rows stay due) and reads the depths of every queue.
        DurableEngine engine = engines.start(options("depths", "served").meterRegistry(meters));
        engine.admin().pauseQueue("served").block(WAIT);
        String instances = "\"" + db.schema() + "\".durable_instances";
        db.execute("INSERT INTO " + instances + " (type, queue, step, state, max_attempts, eligible_at)"
                + " SELECT 'ok', 'elsewhere', 'run', '\"x\"', 1, now() - interval '90 seconds'"
                + " FROM generate_series(1, 5);"
                + " INSERT INTO " + instances + " (type, queue, step, state, max_attempts, eligible_at)"
                + " VALUES ('ok', 'elsewhere', 'run', '\"x\"', 1, now() + interval '1 hour');"
                + " INSERT INTO " + instances + " (type, queue, step, state, max_attempts, concurrency_key)"
                + " SELECT 'ok', 'served', 'run', '\"x\"', 1, 'one key' FROM generate_series(1, 3);");

        List<QueueDepth> depths = engine.admin().depths().block(WAIT);
        assertThat(depths).extracting(QueueDepth::queue, QueueDepth::due)
                .containsExactly(org.assertj.core.groups.Tuple.tuple("elsewhere", 5L),
                        org.assertj.core.groups.Tuple.tuple("served", 1L));
        assertThat(depths.get(0).oldestWait()).isBetween(Duration.ofSeconds(89), Duration.ofMinutes(10));

        Eventually.until("the gauges sampled", WAIT, () -> meters.find("durable.queue.depth").tag("queue", "elsewhere")
                .gauge() != null && meters.find("durable.queue.depth").tag("queue", "elsewhere").gauge().value() == 5);
        assertThat(meters.get("durable.queue.depth").tag("queue", "served").gauge().value()).isEqualTo(1);
        assertThat(meters.get("durable.queue.age").tag("queue", "elsewhere").gauge().value()).isGreaterThan(89);
        assertThat(meters.get("durable.queue.age").tag("queue", "elsewhere").gauge().getId().getBaseUnit())
                .isEqualTo("seconds");

        Sql.update(db, "DELETE FROM {schema}.durable_instances WHERE queue = 'elsewhere'");
        Eventually.until("a queue emptied leaves the gauges", WAIT,
                () -> meters.find("durable.queue.depth").tag("queue", "elsewhere").gauge() == null);
    }

    /** Every engine on the database reads one secret per name, also when they ask at once; a bad name is refused. */
    @Test
    void theEnginesOnADatabaseShareOneSecretPerName() {
        DurableEngine first = engines.start(options("one"));
        DurableEngine second = engines.start(options("two"));
        List<byte[]> raced = Flux.range(0, 8)
                .flatMap(i -> (i % 2 == 0 ? first : second).admin().sharedSecret("raced"), 8)
                .collectList().block(WAIT);
        assertThat(raced).hasSize(8).allSatisfy(secret -> assertThat(secret).hasSize(32).isEqualTo(raced.get(0)));
        assertThat(second.admin().sharedSecret("other").block(WAIT)).isNotEqualTo(raced.get(0));
        assertThatThrownBy(() -> first.admin().sharedSecret(" ").block(WAIT)).isInstanceOf(InvalidRequestException.class);
    }

    /** The window and bucket are whole minutes, the bucket divides the window; GC deletes minutes past the retention. */
    @Test
    void oldMinutesGoWithTheRetentionAndBadWindowsAreRefused() {
        DurableEngine engine = engines.start(options("gc").retention(Duration.ofHours(2)));
        String minutes = "\"" + db.schema() + "\".durable_queue_minutes";
        db.execute("INSERT INTO " + minutes + " (minute, queue, completed) VALUES"
                + " (date_trunc('minute', now() - interval '3 hours'), 'old', 7),"
                + " (date_trunc('minute', now() - interval '1 hour'), 'kept', 5)");
        engine.maintenance().orElseThrow().collectGarbage().block(WAIT);
        assertThat(Sql.query(db, "SELECT queue FROM {schema}.durable_queue_minutes WHERE queue IN ('old', 'kept')",
                row -> row.get(0, String.class))).containsExactly("kept");
        // Three whole hours up to now's: the hour-old minute is in one of them whatever the time of day.
        assertThat(engine.admin().activity(Duration.ofHours(3), HOUR, "kept").block(WAIT))
                .extracting(QueueActivity::queue, QueueActivity::completed)
                .containsExactly(org.assertj.core.groups.Tuple.tuple("kept", 5L));

        for (Duration[] bad : new Duration[][] {{Duration.ofSeconds(90), MINUTE}, {HOUR, Duration.ofSeconds(30)},
                {MINUTE, HOUR}, {HOUR, Duration.ofMinutes(7)}, {Duration.ofDays(32), HOUR}, {Duration.ZERO, Duration.ZERO}}) {
            assertThatThrownBy(() -> engine.admin().activity(bad[0], bad[1], null).block(WAIT))
                    .as("%s by %s", bad[0], bad[1]).isInstanceOf(InvalidRequestException.class);
        }
    }
}
