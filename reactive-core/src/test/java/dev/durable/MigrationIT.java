package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class MigrationIT {

    private static List<String> tables(TestDatabase db) {
        return Sql.query(db, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1"
                + " ORDER BY table_name", row -> row.get(0, String.class), db.schema());
    }

    @Test
    void twoEnginesMigratingAtOnceApplyEachVersionExactlyOnce(TestDatabase db) {
        DurableEngine first = DurableEngine.builder(db.engineOptions().name("first").build()).build();
        DurableEngine second = DurableEngine.builder(db.engineOptions().name("second").build()).build();
        try {
            List<Integer> versions = Mono.zip(first.migrate(), second.migrate(),
                            (a, b) -> List.of(a, b))
                    .block(Duration.ofSeconds(60));
            assertThat(versions).containsExactly(LATEST, LATEST);
            assertThat(Sql.query(db, "SELECT version FROM {schema}.durable_schema_version ORDER BY version",
                    row -> row.get(0, Integer.class))).containsExactlyElementsOf(VERSIONS);
            assertThat(tables(db)).containsExactly("durable_attempts", "durable_engines", "durable_fair_keys", "durable_forks",
                    "durable_gate_slots", "durable_history", "durable_instances", "durable_instances_all",
                    "durable_key_skips", "durable_limit_permits", "durable_queue_pauses", "durable_rate_buckets", "durable_schema_version",
                    "durable_signals", "durable_step_inputs", "durable_window_counters");

            // Idempotent: nothing left to apply.
            assertThat(first.migrate().block()).isEqualTo(LATEST);
            assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_schema_version",
                    row -> row.get(0, Long.class))).containsExactly((long) VERSIONS.size());

            // The down path removes every table but the version record, and up works again.
            assertThat(first.migrateDown(0).block()).isZero();
            assertThat(tables(db)).containsExactly("durable_schema_version");
            assertThat(second.migrate().block()).isEqualTo(LATEST);
            assertThat(tables(db)).contains("durable_instances", "durable_engines");
        } finally {
            first.closeLater().block();
            second.closeLater().block();
        }
    }

    /** The newest schema version this build ships. */
    private static final int LATEST = 16;
    /** The versions this build ships. */
    private static final List<Integer> VERSIONS = List.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);

    @Test
    void aVersionOneSchemaWithWorkInItUpgradesAndTheWorkRuns(TestDatabase db) {
        DurableEngine old = DurableEngine.builder(db.engineOptions().name("old").build()).build();
        try {
            old.migrate().block(Duration.ofSeconds(60));
            assertThat(old.migrateDown(1).block()).isEqualTo(1);
            assertThat(tables(db)).doesNotContain("durable_engines");
            // Work a version-1 deployment left behind: a runnable job and a parked workflow with a signal.
            db.execute("INSERT INTO \"" + db.schema() + "\".durable_instances (type, queue, step, state, max_attempts)"
                    + " VALUES ('echo', 'upgraded', 'run', '\"kept\"', 5)");
            // A settled one with a signal it never read: version 3 moves it to the history, signal gone.
            db.execute("INSERT INTO \"" + db.schema() + "\".durable_instances (id, type, queue, step, state,"
                    + " max_attempts, status, result) VALUES (1000, 'echo', 'upgraded', 'run', '\"old\"', 5, 'done',"
                    + " '\"was done\"')");
            db.execute("INSERT INTO \"" + db.schema() + "\".durable_signals (instance_id, name) VALUES (1000, 'late')");
        } finally {
            old.closeLater().block();
        }
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class, (String s) -> Mono.just(s))
                .queue("upgraded");
        DurableEngine upgraded = DurableEngine.builder(db.engineOptions().name("new")
                        .queue(QueueOptions.builder("upgraded").pollInterval(Duration.ofMillis(100)).build()).build())
                .register(echo).build();
        try {
            upgraded.start().block(Duration.ofSeconds(60));
            assertThat(Sql.query(db, "SELECT max(version) FROM {schema}.durable_schema_version",
                    row -> row.get(0, Integer.class))).containsExactly(LATEST);
            // (The runnable job may have run and settled there too by now.)
            assertThat(Sql.query(db, "SELECT id || ' ' || status FROM {schema}.durable_history",
                    row -> row.get(0, String.class))).contains("1000 done");
            assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals", row -> row.get(0, Long.class)))
                    .containsExactly(0L);
            Instance settled = upgraded.get(1000).block();
            assertThat(settled.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(settled.resultJson()).isEqualTo("\"was done\"");
            long id = Sql.query(db, "SELECT id FROM {schema}.durable_instances_all WHERE id <> 1000",
                    row -> row.get(0, Long.class)).get(0);
            Instance done = upgraded.awaitSettled(id, Duration.ofSeconds(30)).block();
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(done.resultJson()).isEqualTo("\"kept\"");
            assertThat(upgraded.liveEngines().collectList().block()).extracting(LiveEngine::name).contains("new");
            // Version 7 (workflow versions): engines register the lowest version of each type they run.
            assertThat(Sql.query(db, "SELECT lowest_versions[1] FROM {schema}.durable_engines WHERE name = 'new'",
                    row -> row.get(0, Integer.class))).containsExactly(1);
            // Version 6 (conflict policies) works on the upgraded schema: a replace of a live key.
            long held = upgraded.insert(JobRequest.of("echo", "first").correlationKey("v6").runIn(Duration.ofHours(1)))
                    .block();
            assertThat(upgraded.insertWithResult(JobRequest.of("echo", "second").correlationKey("v6")
                    .runIn(Duration.ofHours(1)).onConflict(ConflictPolicy.replace())).block())
                    .isEqualTo(new InsertResult(held, InsertResult.Disposition.REPLACED));
            // Version 8 (replay) works on the upgraded schema: a settled job runs again from its args.
            upgraded.replay(id, "run").block(Duration.ofSeconds(30));
            assertThat(upgraded.awaitSettled(id, Duration.ofSeconds(30)).block().resultJson()).isEqualTo("\"kept\"");
            assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_attempts WHERE instance_id = $1"
                    + " AND outcome = 'replayed'", row -> row.get(0, Long.class), id)).containsExactly(1L);
            // Version 9 (trace context): the columns exist, null without tracing, in both tables and the view.
            assertThat(Sql.query(db, "SELECT count(*)::int FROM {schema}.durable_instances_all"
                    + " WHERE trace_context IS NOT NULL OR trace_last IS NOT NULL", row -> row.get(0, Integer.class)))
                    .containsExactly(0);
            // Version 10 (fair share): a keyed row activates its key.
            upgraded.insert(JobRequest.of("echo", "fair").fairnessKey("tenant-a").runIn(Duration.ofHours(1))).block();
            assertThat(Sql.query(db, "SELECT fairness_key || ' ' || active FROM {schema}.durable_fair_keys",
                    row -> row.get(0, String.class))).containsExactly("tenant-a true");
            // Version 12 (stacked limits): the window columns exist in both tables and the view.
            assertThat(Sql.query(db, "SELECT count(*)::int FROM information_schema.columns WHERE table_schema = '"
                    + db.schema() + "' AND column_name IN ('window_name', 'window_weight', 'window_partition')",
                    row -> row.get(0, Integer.class))).containsExactly(9);
            // Version 14 (plain job cost): the hot table was made again with the columns a claim writes last,
            // its rows, identity, indexes, triggers and view carried over; executing rows are indexed by id.
            assertThat(Sql.query(db, "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute"
                    + " WHERE attrelid = '\"" + db.schema() + "\".durable_instances'::regclass AND attnum > 0"
                    + " AND NOT attisdropped", row -> row.get(0, String.class)).get(0))
                    .endsWith("status,attempt,claimed_by,lease_expires_at,updated_at");
            assertThat(Sql.query(db, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1"
                    + " AND indexname = 'durable_instances_executing_idx'", row -> row.get(0, String.class), db.schema())
                    .get(0)).contains("(id)");
            assertThat(Sql.query(db, "SELECT count(*)::int FROM pg_indexes WHERE schemaname = $1"
                    + " AND indexname = 'durable_history_queue_idx'", row -> row.get(0, Integer.class), db.schema()))
                    .containsExactly(0);
            long after = upgraded.insert(JobRequest.of("echo", "after v14")).block();
            assertThat(after).isGreaterThan(id);
            assertThat(upgraded.awaitSettled(after, Duration.ofSeconds(30)).block().resultJson())
                    .isEqualTo("\"after v14\"");
            // Version 15 (fair key caps): a key's cap is stored with it, none until its queue's function answers.
            assertThat(Sql.query(db, "SELECT count(*)::int FROM {schema}.durable_fair_keys WHERE cap IS NULL",
                    row -> row.get(0, Integer.class))).containsExactly(1);
            // Version 16 (bounded key election): the election tries the key's lock rather than waiting on it.
            assertThat(Sql.query(db, "SELECT prosrc FROM pg_proc WHERE proname = 'durable_key_elect'"
                    + " AND pronamespace = $1::regnamespace", row -> row.get(0, String.class), db.schema()).get(0))
                    .contains("pg_try_advisory_xact_lock", "durable_key_skips", "lock_not_available");
            assertThat(tables(db)).contains("durable_key_skips");
        } finally {
            upgraded.closeLater().block();
        }
        // Down to version 6: the permits table goes (version 11 undone).
        DurableEngine permits = DurableEngine.builder(db.engineOptions().name("permits").build()).build();
        try {
            assertThat(permits.migrateDown(6).block()).isEqualTo(6);
            assertThat(tables(db)).doesNotContain("durable_limit_permits", "durable_window_counters").contains("durable_history");
        } finally {
            permits.closeLater().block();
        }
        // Down to version 2: the history comes back into the one table.
        DurableEngine tool = DurableEngine.builder(db.engineOptions().name("tool").build()).build();
        try {
            assertThat(tool.migrateDown(2).block()).isEqualTo(2);
            assertThat(tables(db)).doesNotContain("durable_history", "durable_step_inputs", "durable_forks");
            assertThat(Sql.query(db, "SELECT status, count(*)::int FROM {schema}.durable_instances GROUP BY status",
                    row -> row.get(0, String.class) + " " + row.get(1, Integer.class)))
                    .containsExactlyInAnyOrder("done 3", "runnable 2"); // the v6 and v10 rows, an hour ahead; v14's job done
            assertThat(Sql.query(db, "SELECT count(*)::int FROM information_schema.columns WHERE table_schema = '"
                    + db.schema() + "' AND column_name IN ('follow_up', 'debounce_until', 'lowest_versions', 'trace_context',"
                    + " 'trace_last', 'fairness_key', 'window_name', 'window_weight', 'window_partition')",
                    row -> row.get(0, Integer.class))).containsExactly(0);
        } finally {
            tool.closeLater().block();
        }
    }

    /**
     * Version 13 elects the heads of keyed backlogs a version-12 deployment left: a busy key's runnable
     * rows all wait; an idle key's first row in election order (due rows by priority, eligible time, id)
     * is its head; gated and keyless rows are untouched. Undone, every runnable row is a candidate again.
     */
    @Test
    void aVersionTwelveKeyedBacklogGetsOneHeadPerKey(TestDatabase db) {
        DurableEngine tool = DurableEngine.builder(db.engineOptions().name("keys").build()).build();
        try {
            tool.migrate().block(Duration.ofSeconds(60));
            assertThat(tool.migrateDown(12).block()).isEqualTo(12);
            String table = "\"" + db.schema() + "\".durable_instances";
            db.execute("INSERT INTO " + table + " (type, queue, step, max_attempts, status, claimed_by, lease_expires_at,"
                    + " concurrency_key) VALUES ('t', 'keys', 'run', 5, 'executing', 'w', now() + interval '1 hour', 'busy')");
            db.execute("INSERT INTO " + table + " (type, queue, step, max_attempts, concurrency_key, priority, eligible_at)"
                    + " VALUES ('t', 'keys', 'run', 5, 'busy', 0, now()), ('t', 'keys', 'run', 5, 'busy', 0, now()),"
                    + " ('t', 'keys', 'run', 5, 'idle', -5, now() + interval '1 hour'),"
                    + " ('t', 'keys', 'run', 5, 'idle', 2, now() - interval '1 minute'),"
                    + " ('t', 'keys', 'run', 5, 'idle', 1, now() - interval '1 second'),"
                    + " ('t', 'keys', 'run', 5, 'idle', 1, now() - interval '2 seconds'),"
                    + " ('t', 'keys', 'run', 5, NULL, 0, now())");
            db.execute("INSERT INTO " + table + " (type, queue, step, max_attempts, concurrency_key, gate_name)"
                    + " VALUES ('t', 'keys', 'run', 5, 'gated', 'g'), ('t', 'keys', 'run', 5, 'gated', 'g')");
            assertThat(tool.migrate().block(Duration.ofSeconds(60))).isEqualTo(LATEST);
            assertThat(Sql.query(db, "SELECT COALESCE(concurrency_key, '-') || ' ' || status || ' ' || priority"
                            + " FROM {schema}.durable_instances WHERE queue = 'keys' AND NOT key_waiting ORDER BY id",
                    row -> row.get(0, String.class)))
                    .containsExactly("busy executing 0", "idle runnable 1", "- runnable 0", "gated runnable 0",
                            "gated runnable 0");
            // The idle key's head is the due row of the most urgent priority that came due first.
            assertThat(Sql.query(db, "SELECT eligible_at < now() - interval '1.5 seconds' FROM {schema}.durable_instances"
                    + " WHERE concurrency_key = 'idle' AND NOT key_waiting", row -> row.get(0, Boolean.class)))
                    .containsExactly(true);
            assertThat(tool.migrateDown(12).block()).isEqualTo(12);
            assertThat(Sql.query(db, "SELECT count(*)::int FROM information_schema.columns WHERE table_schema = '"
                    + db.schema() + "' AND column_name = 'key_waiting'", row -> row.get(0, Integer.class)))
                    .containsExactly(0);
            assertThat(tool.migrate().block(Duration.ofSeconds(60))).isEqualTo(LATEST);
            db.execute("DELETE FROM " + table + " WHERE queue = 'keys'");
        } finally {
            tool.closeLater().block();
        }
    }

    @Test
    void versionFourteenRefusesATableItCannotRebuildWhole(TestDatabase db) {
        DurableEngine tool = DurableEngine.builder(db.engineOptions().name("rebuild").build()).build();
        String publication = "durable_pub_" + Math.abs(db.schema().hashCode());
        try {
            tool.migrate().block(Duration.ofSeconds(60));
            assertThat(tool.migrateDown(13).block()).isEqualTo(13);
            db.execute("CREATE PUBLICATION " + publication + " FOR TABLE \"" + db.schema() + "\".durable_instances");
            // Rebuilt, the table would silently leave the publication: the version refuses, and rolls back whole.
            assertThatThrownBy(() -> tool.migrate().block(Duration.ofSeconds(60)))
                    .hasMessageContaining("drop it from its publications first");
            assertThat(Sql.query(db, "SELECT max(version)::int FROM {schema}.durable_schema_version",
                    row -> row.get(0, Integer.class))).containsExactly(13);
            db.execute("DROP PUBLICATION " + publication);
            assertThat(tool.migrate().block(Duration.ofSeconds(60))).isEqualTo(LATEST);
        } finally {
            db.execute("DROP PUBLICATION IF EXISTS " + publication);
            tool.closeLater().block();
        }
    }

    @Test
    void theMigrationFilesAreFlywayNamedAndShippedInTheJar() {
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V1__durable_schema.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U1__durable_schema.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V2__engine_registry.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U2__engine_registry.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V3__settled_history.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U3__settled_history.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V4__admin.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U4__admin.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V5__queue_pauses.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U5__queue_pauses.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V6__conflict_policies.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U6__conflict_policies.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V7__workflow_versions.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U7__workflow_versions.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V8__replay.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U8__replay.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V9__trace_context.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U9__trace_context.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V11__limit_permits.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U11__limit_permits.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V10__fair_share.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U10__fair_share.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V12__stacked_limits.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V13__key_waiting.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U13__key_waiting.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U12__stacked_limits.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V14__plain_job_cost.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U14__plain_job_cost.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V15__fair_key_caps.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U15__fair_key_caps.sql")).isNotNull();
    }
}
