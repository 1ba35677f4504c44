package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.Option;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Keys whose rows wait behind no head (key_waiting) are healed by maintenance: an election on an
 * older snapshot strands them for real, and one pass of the key healer elects their head.
 */
@ExtendWith(PostgresExtension.class)
class KeyHealIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    /** Keys with waiting rows and nothing that could ever promote them: no head, nothing executing. */
    private static final String STRANDED_KEYS = """
            SELECT concurrency_key FROM {schema}.durable_instances
             WHERE concurrency_key LIKE $1 || '%' AND gate_name IS NULL AND status IN ('runnable', 'executing')
             GROUP BY concurrency_key
            HAVING count(*) FILTER (WHERE NOT key_waiting) = 0
             ORDER BY concurrency_key""";

    @RegisterExtension
    final Engines engines = new Engines();
    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        this.db = database;
        engines.on(database);
    }

    /**
     * A caller's open transaction holds the key's election lock (it inserted a row behind the key's
     * head): a cancel of the head does not wait for it past the election's bound (durable_key_elect), it
     * leaves the key without an election. The row commits waiting behind no head, with no later
     * event of the key; the engine's connections here default to REPEATABLE READ besides (a server or
     * role setting some shops use), where an election that did get the lock could still miss the row
     * on its older snapshot. One pass of the key healing elects the head either way.
     */
    @Test
    void aRowLeftBehindASkippedElectionRunsAfterOneHealingPass() throws Exception {
        JobDefinition<String, String> work = JobDefinition.of("work", String.class, (String s) -> Mono.just(s))
                .queue("q");
        ConnectionPool repeatable = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(
                        ConnectionFactoryOptions.parse(db.url()).mutate()
                                .option(Option.valueOf("options"),
                                        Map.of("default_transaction_isolation", "repeatable read"))
                                .build()))
                .maxSize(4).build());
        try {
            // This engine inserts and cancels only: it runs another queue.
            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            DurableEngine inserter = engines.start(engines.options("rr").connectionFactory(repeatable)
                    .meterRegistry(meters)
                    .queue(QueueOptions.builder("elsewhere").build())
                    .keyHealer(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                    .skippedKeyElections(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled()), work);
            long head = inserter.insert(JobRequest.of("work", "head").concurrencyKey("a-k")).block(WAIT);
            Connection caller = Mono.from(db.connectionFactory().create()).block(WAIT);
            CompletableFuture<CancelResult> cancel;
            long waiting;
            try {
                Mono.from(caller.beginTransaction()).block(WAIT);
                waiting = inserter.insert(caller, JobRequest.of("work", "waiting").concurrencyKey("a-k")).block(WAIT);
                cancel = inserter.cancel(head).toFuture();
                // The cancel ends while the caller is still open: its election gave up on the held lock.
                assertThat(cancel.get(WAIT.toSeconds(), TimeUnit.SECONDS)).isEqualTo(CancelResult.CANCELLED);
                assertThat(Sql.query(db, "SELECT concurrency_key FROM {schema}.durable_key_skips",
                        row -> row.get(0, String.class))).containsExactly("a-k");
                Mono.from(caller.commitTransaction()).block(WAIT);
            } finally {
                Mono.from(caller.close()).block(WAIT);
            }
            assertThat(stranded("a-")).containsExactly("a-k");

            // An engine that runs the queue, healer off: its picks go on, the stranded row stays.
            DurableEngine runner = engines.start(engines.options("runner")
                    .queue(QueueOptions.builder("q").pollInterval(Duration.ofMillis(50)).build())
                    .keyHealer(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                    .skippedKeyElections(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled()), work);
            long other = runner.insert(JobRequest.of("work", "other").concurrencyKey("a-other")).block(WAIT);
            assertThat(runner.awaitSettled(other, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(runner.maintenance().orElseThrow().reap().block(WAIT)).isZero();
            assertThat(stranded("a-")).containsExactly("a-k");
            assertThat(runner.get(waiting).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);

            // One pass elects the head (on the repeatable-read engine: the healer reads committed); the row runs.
            assertThat(inserter.maintenance().orElseThrow().healKeys().block(WAIT)).isEqualTo(1L);
            assertThat(runner.awaitSettled(waiting, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(stranded("a-")).isEmpty();
            assertThat(meters.counter("durable.keys.healed").count()).isEqualTo(1.0);
            assertThat(inserter.maintenance().orElseThrow().healKeys().block(WAIT)).isZero();
            assertThat(inserter.maintenance().orElseThrow().stats().failures()).isZero();
        } finally {
            engines.afterEach(null);
            repeatable.dispose();
        }
    }

    /**
     * A caller keeps a transaction open after inserting a job under a key whose head is running: the
     * head's outcome, and the outcomes committed beside it, commit while the caller is still open
     * (the head's election gives up on the caller's lock instead of holding back the commit); once the
     * caller commits, its job runs without anyone calling maintenance by hand.
     */
    @Test
    void aCallersOpenTransactionUnderAKeyHoldsBackNoCommit() throws Exception {
        CompletableFuture<Void> release = new CompletableFuture<>();
        JobDefinition<String, String> work = JobDefinition.of("work", String.class,
                (String s) -> s.equals("head") ? Mono.fromFuture(release).thenReturn(s) : Mono.just(s)).queue("c");
        DurableEngine engine = engines.start(engines.options("open")
                .queue(QueueOptions.builder("c").concurrency(8).pollInterval(Duration.ofMillis(50)).build()), work);
        long head = engine.insert(JobRequest.of("work", "head").concurrencyKey("c-k")).block(WAIT);
        Eventually.until("the head runs", WAIT,
                () -> engine.get(head).block(WAIT).status() == InstanceStatus.EXECUTING);
        Connection caller = Mono.from(db.connectionFactory().create()).block(WAIT);
        long behind;
        try {
            Mono.from(caller.beginTransaction()).block(WAIT);
            behind = engine.insert(caller, JobRequest.of("work", "behind").concurrencyKey("c-k")).block(WAIT);
            List<Long> others = engine.insertAll(List.of(JobRequest.of("work", "x"), JobRequest.of("work", "y"),
                    JobRequest.of("work", "z"))).block(WAIT);
            release.complete(null);
            assertThat(engine.awaitSettled(head, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            for (long other : others) {
                assertThat(engine.awaitSettled(other, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
            Mono.from(caller.commitTransaction()).block(WAIT);
        } finally {
            Mono.from(caller.close()).block(WAIT);
        }
        assertThat(engine.awaitSettled(behind, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(stranded("c-")).isEmpty();
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_key_skips", row -> row.get(0, Long.class)))
                .containsExactly(0L);
    }

    /**
     * A conflict-policy replace in a caller's REPEATABLE READ transaction changes no key: the holder
     * it rewrites at worst heads its key beside the head (the pick still runs one at a time), and
     * strands nothing.
     */
    @Test
    void aReplaceInACallersRepeatableReadTransactionLeavesNoKeyWithoutAHead() {
        JobDefinition<String, String> work = JobDefinition.of("work", String.class, (String s) -> Mono.just(s))
                .queue("paused");
        DurableEngine engine = engines.start(engines.options("replace")
                .queue(QueueOptions.builder("elsewhere").build()), work);
        long head = engine.insert(JobRequest.of("work", "head").concurrencyKey("b-k")).block(WAIT);
        long holder = engine.insert(JobRequest.of("work", "v1").concurrencyKey("b-k").correlationKey("b-c")).block(WAIT);
        Connection caller = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Mono.from(caller.beginTransaction(IsolationLevel.REPEATABLE_READ)).block(WAIT);
            // The snapshot is taken before a row of the key commits waiting behind the head.
            assertThat(Mono.from(caller.createStatement("SELECT 1").execute()).flatMapMany(r -> r.map(row -> 1))
                    .blockLast(WAIT)).isEqualTo(1);
            long late = engine.insert(JobRequest.of("work", "late").concurrencyKey("b-k")).block(WAIT);
            assertThat(late).isPositive();
            assertThat(engine.insert(caller, JobRequest.of("work", "v2").concurrencyKey("b-moved").correlationKey("b-c")
                    .onConflict(ConflictPolicy.replace()).priority(-5)).block(WAIT)).isEqualTo(holder);
            Mono.from(caller.commitTransaction()).block(WAIT);
        } finally {
            Mono.from(caller.close()).block(WAIT);
        }
        // The holder kept its key, and heads it beside the head until the key's next election.
        assertThat(Sql.query(db, "SELECT concurrency_key, key_waiting FROM {schema}.durable_instances WHERE id = $1",
                row -> row.get(0, String.class) + " " + row.get(1, Boolean.class), holder)).containsExactly("b-k false");
        assertThat(stranded("b-")).isEmpty();
        assertThat(engine.maintenance().orElseThrow().healKeys().block(WAIT)).isZero();
        Sql.update(db, "DELETE FROM {schema}.durable_instances WHERE id = $1", head);
        assertThat(Sql.query(db, "SELECT id FROM {schema}.durable_instances WHERE concurrency_key = 'b-k'"
                + " AND NOT key_waiting", row -> row.get(0, Long.class))).containsExactly(holder);
    }

    /**
     * Stranded by hand (SQL), many keys at once: a pass walks every waiting key batch by batch, elects
     * a head for each stranded one in election order, skips a key another transaction is electing
     * (the next pass takes it), and leaves a key whose row is executing, or that has a head, alone.
     */
    @Test
    void aPassElectsEveryStrandedKeyBatchByBatchAndSkipsAKeyBeingElected() {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine engine = engines.start(engines.options("healer").meterRegistry(meters)
                .queue(QueueOptions.builder("elsewhere").build())
                .keyHealer(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled().withBatchSize(3)
                        .withBudget(Duration.ofMinutes(5))));
        for (int key = 0; key < 10; key++) {
            insert("c-s" + key, 0, "now() - interval '1 minute'");
            insert("c-s" + key, -1, "now() + interval '1 hour'");
            insert("c-s" + key, 2, "now() - interval '2 minutes'");
        }
        long busy = insert("c-busy", 0, "now()");
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'w',"
                + " lease_expires_at = now() + interval '1 hour' WHERE id = $1", busy);
        insert("c-busy", 0, "now()");
        insert("c-fine", 0, "now()");
        insert("c-fine", 0, "now()");
        // Strand: every runnable head of the s keys waits (the flag alone: no trigger elects).
        assertThat(Sql.update(db, "UPDATE {schema}.durable_instances SET key_waiting = true"
                + " WHERE concurrency_key LIKE 'c-s%' AND status = 'runnable' AND NOT key_waiting")).isEqualTo(10);
        assertThat(stranded("c-")).hasSize(10);

        Connection electing = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Mono.from(electing.beginTransaction()).block(WAIT);
            Mono.from(electing.createStatement("SELECT pg_advisory_xact_lock(1262836055, hashtext('c-s4'))").execute())
                    .flatMapMany(r -> r.map(row -> 1)).blockLast(WAIT);
            assertThat(engine.maintenance().orElseThrow().healKeys().block(WAIT)).isEqualTo(9L);
            assertThat(stranded("c-")).containsExactly("c-s4");
            Mono.from(electing.rollbackTransaction()).block(WAIT);
        } finally {
            Mono.from(electing.close()).block(WAIT);
        }
        assertThat(engine.maintenance().orElseThrow().healKeys().block(WAIT)).isEqualTo(1L);
        assertThat(stranded("c-")).isEmpty();
        // Each key's head is its due row of the best priority, as the triggers elect.
        assertThat(Sql.query(db, "SELECT DISTINCT priority FROM {schema}.durable_instances"
                + " WHERE concurrency_key LIKE 'c-s%' AND NOT key_waiting", row -> row.get(0, Integer.class)))
                .containsExactly(0);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE concurrency_key = 'c-busy'"
                + " AND key_waiting", row -> row.get(0, Long.class))).containsExactly(1L);
        assertThat(Sql.query(db, "SELECT concurrency_key FROM {schema}.durable_instances"
                + " WHERE concurrency_key LIKE 'c-%' AND status IN ('runnable', 'executing')"
                + " GROUP BY concurrency_key HAVING count(*) FILTER (WHERE NOT key_waiting) <> 1",
                row -> row.get(0, String.class))).isEmpty();
        assertThat(meters.counter("durable.keys.healed").count()).isEqualTo(10.0);
        assertThat(engine.maintenance().orElseThrow().healKeys().block(WAIT)).isZero();
    }

    /** The stranded keys that start with {@code prefix} (each test has its own keys in the class's schema). */
    private List<String> stranded(String prefix) {
        return Sql.query(db, STRANDED_KEYS, row -> row.get(0, String.class), prefix);
    }

    private long insert(String key, int priority, String eligibleAt) {
        return Sql.query(db, "INSERT INTO {schema}.durable_instances (type, queue, step, max_attempts, priority,"
                + " eligible_at, concurrency_key) VALUES ('t', 'c-q', 'run', 5, " + priority + ", " + eligibleAt
                + ", $1) RETURNING id", row -> row.get(0, Long.class), key).get(0);
    }
}
