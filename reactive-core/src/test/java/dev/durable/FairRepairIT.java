package dev.durable;

import static dev.durable.FairnessIT.insert;
import static dev.durable.FairnessIT.instances;
import static dev.durable.FairnessIT.picks;
import static dev.durable.FairnessIT.share;
import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.Db;
import dev.durable.internal.sql.FairSql;
import dev.durable.internal.sql.FairPickSql;
import dev.durable.internal.sql.PickSql;
import dev.durable.internal.sql.Tables;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The fair pick's edges, on the real database: a key row held by a caller's open transaction is
 * never waited on, a key parked while such a transaction held its row is healed, keyless and
 * cap-gated rows left from before still run, and a throttled key's backlog is not walked per pick.
 */
@ExtendWith(PostgresExtension.class)
class FairRepairIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    @Test
    void aPickNeverWaitsOnAKeyRowAnOpenInsertHolds(TestDatabase db) {
        PickSql picks = picks(db);
        FairPickSql.FairShare weights = share(Map.of(), 1);
        // Key p parks until its scheduled row comes due.
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key, eligible_at)"
                + " VALUES ('t', 'held', 'run', 5, 'p', now() + interval '1 second')");
        assertThat(picks.pick("held", 5, "w", 60_000, weights).block(WAIT).rows()).isEmpty();
        insert(db, "held", "other", 200);
        Connection holder = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // A caller's transaction inserts another row of the parked key and stays open: its
            // activation holds the key's row.
            begin(holder);
            execute(holder, "INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key)"
                    + " VALUES ('t', 'held', 'run', 5, 'p')");
            List<ClaimedRow> claimed = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (claimed.stream().noneMatch(row -> "p".equals(keyOf(db, row.id()))) && System.nanoTime() < deadline) {
                // Each pick answers (the Db bounds it by WAIT): p's scheduled row is claimed once due.
                claimed.addAll(picks.pick("held", 5, "w", 60_000, weights).block(WAIT).rows());
            }
            assertThat(claimed).as("picks went on beside the open transaction").hasSizeGreaterThan(1);
            assertThat(claimed.stream().filter(row -> "p".equals(keyOf(db, row.id())))).hasSize(1);
        } finally {
            Mono.from(holder.rollbackTransaction()).then(Mono.from(holder.close())).block(WAIT);
        }
    }

    @Test
    void aKeyParkedWhileAnOpenTransactionHeldItsRowIsHealedAndTheRowRuns(TestDatabase db) {
        PickSql picks = picks(db);
        FairPickSql.FairShare weights = share(Map.of(), 1);
        FairSql fair = new FairSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        insert(db, "strand", "k", 1);
        assertThat(picks.pick("strand", 5, "w", 60_000, weights).block(WAIT).rows()).hasSize(1);
        Connection holder = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // The key is active: the insert's trigger leaves it alone, and the row stays invisible.
            begin(holder);
            execute(holder, "INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key)"
                    + " VALUES ('t', 'strand', 'run', 5, 'k')");
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!parkedForGood(db, "strand", "k") && System.nanoTime() < deadline) {
                assertThat(picks.pick("strand", 5, "w", 60_000, weights).block(WAIT).rows()).isEmpty();
                sleep(Duration.ofMillis(200));
            }
            assertThat(parkedForGood(db, "strand", "k")).isTrue();
            Mono.from(holder.commitTransaction()).block(WAIT);
        } finally {
            Mono.from(holder.close()).block(WAIT);
        }
        assertThat(picks.pick("strand", 5, "w", 60_000, weights).block(WAIT).rows()).as("stranded").isEmpty();

        FairSql.Healed healed = fair.heal(100, "", "", WAIT).block(WAIT);
        assertThat(healed.woken()).isEqualTo(1);
        assertThat(picks.pick("strand", 5, "w", 60_000, weights).block(WAIT).rows()).hasSize(1);
    }

    @Test
    void theHealerWalksParkedKeysInBatchesAndWakesOnlyThoseWithRows(TestDatabase db) {
        picks(db);
        FairSql fair = new FairSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_fair_keys (queue, fairness_key, pass, active)"
                + " SELECT 'walk', 'idle-' || lpad(g::text, 4, '0'), 0, false FROM generate_series(1, 250) g");
        // Rows of two parked keys (inserted with the trigger off, as if committed after the parking).
        db.execute("ALTER TABLE " + instances(db) + " DISABLE TRIGGER durable_fair_inserted");
        insert(db, "walk", "idle-0007", 2);
        insert(db, "walk", "idle-0200", 1);
        db.execute("ALTER TABLE " + instances(db) + " ENABLE TRIGGER durable_fair_inserted");
        long woken = 0;
        String queue = "";
        String key = "";
        int batches = 0;
        while (true) {
            FairSql.Healed healed = fair.heal(100, queue, key, WAIT).block(WAIT);
            batches++;
            woken += healed.woken();
            if (healed.scanned() < 100) {
                break;
            }
            queue = healed.lastQueue();
            key = healed.lastKey();
        }
        assertThat(batches).isEqualTo(3);
        assertThat(woken).isEqualTo(2);
        assertThat(Sql.query(db, "SELECT fairness_key FROM {schema}.durable_fair_keys WHERE queue = 'walk' AND active"
                + " ORDER BY 1", row -> row.get(0, String.class))).containsExactly("idle-0007", "idle-0200");
    }

    @Test
    void keylessRowsQueuedBeforeTheQueueWasFairRun(TestDatabase db) {
        picks(db);
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class, (String s) -> Mono.just(s))
                .queue("late-fair");
        DurableEngine unfair = DurableEngine.builder(db.engineOptions().build()).register(echo).build();
        List<Long> ids = new ArrayList<>();
        try {
            unfair.start().block(WAIT);
            for (int i = 0; i < 30; i++) {
                ids.add(unfair.insert(JobRequest.of("echo", "x" + i)).block(WAIT));
            }
        } finally {
            unfair.closeLater().block(WAIT);
        }
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE queue = 'late-fair'"
                + " AND fairness_key IS NULL AND status = 'runnable'", row -> row.get(0, Long.class))).containsExactly(30L);
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .fairKeyHealer(Maintenance.TaskOptions.every(Duration.ofMillis(100)).withBatchSize(7))
                        .queue(QueueOptions.builder("late-fair").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().build()).build()).build())
                .register(echo).build();
        try {
            engine.start().block(WAIT);
            for (long id : ids) {
                assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void rowsWrittenUnderAPerKeyCapRunOnceTheCapIsRemoved(TestDatabase db) {
        picks(db);
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class, (String s) -> Mono.just(s))
                .queue("uncapped");
        // The capped engine only inserts: its queue is paused.
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_queue_pauses (queue) VALUES ('uncapped')");
        DurableEngine capped = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("uncapped").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().maxExecutingPerKey(1).build()).build()).build())
                .register(echo).build();
        List<Long> ids = new ArrayList<>();
        try {
            capped.start().block(WAIT);
            for (int i = 0; i < 12; i++) {
                ids.add(capped.insert(JobRequest.of("echo", "x" + i).fairnessKey(i % 2 == 0 ? "a" : "b")).block(WAIT));
            }
        } finally {
            capped.closeLater().block(WAIT);
        }
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE gate_name = 'fairness.uncapped'",
                row -> row.get(0, Long.class))).containsExactly(12L);
        db.execute("DELETE FROM \"" + db.schema() + "\".durable_queue_pauses");
        for (Fairness fairness : List.of(Fairness.builder().build(), Fairness.none())) {
            // Once without the cap, once with fairness off (rows inserted keyed again, under the cap).
            DurableEngine engine = DurableEngine.builder(db.engineOptions()
                            .fairKeyHealer(Maintenance.TaskOptions.every(Duration.ofMillis(100)).withBatchSize(5))
                            .queue(QueueOptions.builder("uncapped").pollInterval(Duration.ofMillis(50))
                                    .fairness(fairness).build()).build())
                    .register(echo).build();
            try {
                engine.start().block(WAIT);
                for (long id : ids) {
                    assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
                }
            } finally {
                engine.closeLater().block(WAIT);
            }
            if (fairness.enabled()) {
                db.execute("INSERT INTO \"" + db.schema() + "\".durable_queue_pauses (queue) VALUES ('uncapped')");
                capped = DurableEngine.builder(db.engineOptions()
                                .queue(QueueOptions.builder("uncapped")
                                        .fairness(Fairness.builder().maxExecutingPerKey(1).build()).build()).build())
                        .register(echo).build();
                ids.clear();
                try {
                    capped.start().block(WAIT);
                    for (int i = 0; i < 6; i++) {
                        ids.add(capped.insert(JobRequest.of("echo", "y" + i).fairnessKey("c")).block(WAIT));
                    }
                } finally {
                    capped.closeLater().block(WAIT);
                }
                db.execute("DELETE FROM \"" + db.schema() + "\".durable_queue_pauses");
            }
        }
    }

    static boolean parkedForGood(TestDatabase db, String queue, String key) {
        return Sql.query(db, "SELECT NOT active AND wake_at IS NULL FROM {schema}.durable_fair_keys WHERE queue = '"
                + queue + "' AND fairness_key = '" + key + "'", row -> row.get(0, Boolean.class)).get(0);
    }

    static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(interrupted);
        }
    }

    static String keyOf(TestDatabase db, long id) {
        return Sql.query(db, "SELECT fairness_key FROM {schema}.durable_instances WHERE id = " + id,
                row -> row.get(0, String.class)).get(0);
    }

    static void begin(Connection connection) {
        Mono.from(connection.beginTransaction()).block(WAIT);
    }

    static void execute(Connection connection, String sql) {
        Flux.from(connection.createStatement(sql).execute()).concatMap(result -> result.getRowsUpdated()).blockLast(WAIT);
    }
}
