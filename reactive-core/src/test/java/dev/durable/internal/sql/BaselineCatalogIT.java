package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.Db;
import dev.durable.internal.sql.Migrator.Migration;
import dev.durable.support.SchemaCatalog;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.SortedMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The baseline replaced the sixteen migrations of the pre-release builds and must make exactly the
 * schema they made: the same tables and columns (order, type, nullability, default, collation,
 * storage options), constraints, indexes, sequences, functions (signature, volatility, security,
 * settings, body), triggers, view, statistics and grants. Each is applied through the migrator into a
 * schema of its own and the two catalogs are compared ({@link SchemaCatalog}); a function body that
 * differs only in comments or whitespace is equal, anything else is a difference.
 */
@ExtendWith(PostgresExtension.class)
class BaselineCatalogIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    /** The pre-release migrations, kept as test resources only (never in the jar) for this comparison. */
    static final String PRE_RELEASE_DIRECTORY = "/dev/durable/legacy-migrations/";

    /** The pre-release history the baseline replaced, as those builds recorded it (their undo files are gone). */
    static final List<Migration> PRE_RELEASE = List.of(new Migration(1, "durable_schema", PRE_RELEASE_DIRECTORY),
            new Migration(2, "engine_registry", PRE_RELEASE_DIRECTORY),
            new Migration(3, "settled_history", PRE_RELEASE_DIRECTORY),
            new Migration(4, "admin", PRE_RELEASE_DIRECTORY), new Migration(5, "queue_pauses", PRE_RELEASE_DIRECTORY),
            new Migration(6, "conflict_policies", PRE_RELEASE_DIRECTORY),
            new Migration(7, "workflow_versions", PRE_RELEASE_DIRECTORY),
            new Migration(8, "replay", PRE_RELEASE_DIRECTORY), new Migration(9, "trace_context", PRE_RELEASE_DIRECTORY),
            new Migration(10, "fair_share", PRE_RELEASE_DIRECTORY),
            new Migration(11, "limit_permits", PRE_RELEASE_DIRECTORY),
            new Migration(12, "stacked_limits", PRE_RELEASE_DIRECTORY),
            new Migration(13, "key_waiting", PRE_RELEASE_DIRECTORY),
            new Migration(14, "plain_job_cost", PRE_RELEASE_DIRECTORY),
            new Migration(15, "fair_key_caps", PRE_RELEASE_DIRECTORY),
            new Migration(16, "key_election_bounded", PRE_RELEASE_DIRECTORY));

    @Test
    void theBaselineMakesTheSchemaThePreReleaseMigrationsMade(TestDatabase db) {
        try (TestDatabase preRelease = TestPostgres.newDatabase("pre_release")) {
            Db sql = new Db(db.connectionFactory(), WAIT);
            assertThat(new Migrator(sql, db.schema()).migrate(1).block(WAIT)).isEqualTo(1);
            assertThat(new Migrator(sql, preRelease.schema(), PRE_RELEASE).migrate().block(WAIT)).isEqualTo(16);

            SortedMap<String, String> baseline = SchemaCatalog.of(db, db.schema());
            SortedMap<String, String> replaced = SchemaCatalog.of(db, preRelease.schema());
            assertThat(SchemaCatalog.differences(replaced, baseline))
                    .as("pre-release V1-V16 (first) against the baseline (second)").isEmpty();

            // Not equal by being empty: every kind of object the schema has is there.
            assertThat(SchemaCatalog.names(baseline, "relation")).hasSize(19).contains("durable_instances",
                    "durable_history", "durable_instances_all", "durable_instances_id_seq", "durable_schema_version");
            assertThat(SchemaCatalog.names(baseline, "column")).hasSize(184);
            assertThat(SchemaCatalog.names(baseline, "index")).hasSize(38);
            assertThat(SchemaCatalog.names(baseline, "constraint")).hasSize(24);
            assertThat(SchemaCatalog.names(baseline, "sequence")).hasSize(3);
            assertThat(SchemaCatalog.names(baseline, "function")).hasSize(11);
            assertThat(SchemaCatalog.names(baseline, "trigger")).hasSize(16);
            assertThat(SchemaCatalog.names(baseline, "view")).containsExactly("durable_instances_all");
            assertThat(SchemaCatalog.names(baseline, "statistics")).containsExactly("durable_history_queue_status");
            assertThat(baseline.get("relation durable_instances"))
                    .contains("options=autovacuum_vacuum_cost_delay=0,autovacuum_vacuum_scale_factor=0,"
                            + "autovacuum_vacuum_threshold=10000,fillfactor=40");
            assertThat(baseline.get("function durable_key_elect(k text, cand bigint, cand_priority integer,"
                    + " cand_eligible timestamp with time zone)")).contains("config=search_path=<schema>",
                    "pg_try_advisory_xact_lock");
        }
    }

    /**
     * The comparison sees what matters and only that: a function re-created with other comments and
     * line breaks is the same; a changed constant in a body, an index's predicate, a column's default,
     * a storage option or a grant is a difference.
     */
    @Test
    void theComparisonSeesEveryChangeButCommentsAndWhitespace(TestDatabase db) {
        try (TestDatabase changed = TestPostgres.newDatabase("changed_baseline")) {
            Db sql = new Db(db.connectionFactory(), WAIT);
            new Migrator(sql, db.schema()).migrate().block(WAIT);
            new Migrator(sql, changed.schema()).migrate().block(WAIT);
            String schema = '"' + changed.schema() + '"';
            SortedMap<String, String> baseline = SchemaCatalog.of(db, db.schema());

            db.execute("SET search_path TO " + schema + "; CREATE OR REPLACE FUNCTION durable_key_wait() RETURNS trigger"
                    + " LANGUAGE plpgsql SET search_path FROM CURRENT AS $$\n"
                    + "BEGIN -- the flag, set   from the row alone\n"
                    + "    NEW.key_waiting :=\n      NEW.concurrency_key IS NOT NULL /* keyed */ AND NEW.gate_name IS NULL"
                    + "\n  AND NEW.status = 'runnable' ;\n RETURN NEW ; END\n$$");
            assertThat(SchemaCatalog.differences(baseline, SchemaCatalog.of(db, changed.schema()))).isEmpty();

            db.execute("SET search_path TO " + schema + "; CREATE OR REPLACE FUNCTION durable_key_wait() RETURNS trigger"
                    + " LANGUAGE plpgsql SET search_path FROM CURRENT AS $$ BEGIN NEW.key_waiting :="
                    + " NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL AND NEW.status = 'executing';"
                    + " RETURN NEW; END $$");
            db.execute("DROP INDEX " + schema + ".durable_instances_gc_idx");
            db.execute("CREATE INDEX durable_instances_gc_idx ON " + schema + ".durable_instances (updated_at)"
                    + " WHERE status IN ('done', 'failed')");
            db.execute("ALTER TABLE " + schema + ".durable_engines ALTER COLUMN seen_at SET DEFAULT clock_timestamp()");
            db.execute("ALTER TABLE " + schema + ".durable_history SET (fillfactor = 90)");
            db.execute("GRANT SELECT ON " + schema + ".durable_forks TO PUBLIC");
            assertThat(SchemaCatalog.differences(baseline, SchemaCatalog.of(db, changed.schema())))
                    .extracting(difference -> difference.lines().findFirst().orElseThrow())
                    .containsExactly("differs: column durable_engines.seen_at",
                            "differs: function durable_key_wait()",
                            "differs: index durable_instances_gc_idx",
                            "differs: relation durable_forks",
                            "differs: relation durable_history");
        }
    }
}
