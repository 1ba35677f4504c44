package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.SchemaVersionException;
import dev.durable.WorkflowDefinition;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Migrator.Migration;
import dev.durable.support.SchemaCatalog;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * The migrator's versioning: each shipped version is applied over the one before it with rows in the
 * tables and undone and applied again to the same schema, a later version applies on top of the
 * baseline, and a schema the library does not know (migrated by a newer Durable, or by the
 * pre-release history the baseline replaced) is refused with {@link SchemaVersionException}.
 */
@ExtendWith(PostgresExtension.class)
class MigratorIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    /** Rows a deployment at version n leaves behind: {@code V<n>.sql} here, when there is one. */
    private static final String ROWS = "/dev/durable/migration-rows/";

    /** The newest version this library ships. */
    private static final int LATEST = Migrator.MIGRATIONS.size();

    /**
     * The shipped versions and a test-only one after the newest (its files are named for its number:
     * renamed when a release adds a version).
     */
    private static final List<Migration> WITH_PROBE = java.util.stream.Stream.concat(Migrator.MIGRATIONS.stream(),
            java.util.stream.Stream.of(new Migration(LATEST + 1, "probe", "/dev/durable/test-migrations/"))).toList();

    /**
     * The path to each version from the one before it, as an upgrade takes it: the version applies
     * over the rows a deployment at the previous version left (every table has some), keeps every
     * table's rows, is recorded, and its undo gives back the previous version's schema exactly
     * (catalog), after which it applies again to the same schema. At the end the engine of the
     * latest version runs the work the rows describe. A new version is covered without a change here;
     * rows of its own (its V&lt;n&gt;.sql under {@link #ROWS}) then go through the next one.
     */
    @Test
    void eachVersionAppliesOverThePreviousOneWithRowsInItsTables(TestDatabase db) {
        Db sql = new Db(db.connectionFactory(), WAIT);
        Migrator migrator = new Migrator(sql, db.schema());
        assertThat(migrator.version().block(WAIT)).isZero();
        int previous = 0;
        SortedMap<String, String> previousCatalog = SchemaCatalog.of(db, db.schema());
        for (Migration migration : Migrator.MIGRATIONS) {
            int version = migration.version();
            Map<String, Long> rowsBefore = rowCounts(db);
            assertThat(migrator.migrate(version).block(WAIT)).isEqualTo(version);
            Map<String, Long> rowsAfter = rowCounts(db);
            rowsBefore.forEach((table, rows) -> assertThat(rowsAfter.getOrDefault(table, 0L))
                    .as("rows of %s after V%d", table, version).isGreaterThanOrEqualTo(rows));
            assertThat(Sql.query(db, "SELECT version FROM {schema}.durable_schema_version ORDER BY version",
                    row -> row.get(0, Integer.class))).containsExactlyElementsOf(IntStream.rangeClosed(1, version).boxed()
                    .toList());
            SortedMap<String, String> catalog = SchemaCatalog.of(db, db.schema());

            assertThat(migrator.migrateDown(previous).block(WAIT)).isEqualTo(previous);
            assertThat(SchemaCatalog.differences(previousCatalog, SchemaCatalog.of(db, db.schema())))
                    .as("V%d undone", version).isEmpty();
            assertThat(migrator.migrate(version).block(WAIT)).isEqualTo(version);
            assertThat(SchemaCatalog.differences(catalog, SchemaCatalog.of(db, db.schema())))
                    .as("V%d applied again", version).isEmpty();
            assertThat(migrator.migrate(version).block(WAIT)).as("nothing left to apply").isEqualTo(version);

            String rows = resource(ROWS + "V" + version + ".sql");
            if (rows != null) {
                db.execute("SET search_path TO \"" + db.schema() + "\";\n" + rows);
                assertThat(rowCounts(db)).as("rows of V%d in every table", version)
                        .allSatisfy((table, count) -> assertThat(count).as(table).isPositive());
            }
            previous = version;
            previousCatalog = catalog;
        }
        theLeftWorkRuns(db);
    }

    /** The latest version's engine runs what the rows of {@link #ROWS}V1.sql describe. */
    private static void theLeftWorkRuns(TestDatabase db) {
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class, (String s) -> Mono.just(s))
                .queue("upgraded");
        WorkflowDefinition<String> greeting = WorkflowDefinition.builder("greeting", String.class).queue("upgraded")
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("go"), "greet", ctx.state(), Duration.ofHours(1))))
                .step("greet", ctx -> Mono.just(Outcome.done("hello " + ctx.state())))
                .build();
        DurableEngine engine = DurableEngine.builder(db.engineOptions().name("latest").reaperInterval(Duration.ofMillis(200))
                        .queue(QueueOptions.builder("upgraded").pollInterval(Duration.ofMillis(100)).build()).build())
                .register(echo).register(greeting).build();
        try {
            engine.start().block(WAIT);
            Map<String, Long> jobs = new LinkedHashMap<>();
            Sql.query(db, "SELECT state #>> '{}', id FROM {schema}.durable_instances_all WHERE type = 'echo' ORDER BY id",
                    row -> Map.entry(row.get(0, String.class), row.get(1, Long.class)))
                    .forEach(job -> jobs.put(job.getKey(), job.getValue()));
            assertThat(jobs.keySet()).containsExactly("plain", "keyed 1", "keyed 2", "fair", "orphan", "old");
            jobs.forEach((argument, id) -> {
                Instance done = engine.awaitSettled(id, Duration.ofSeconds(30)).block(WAIT);
                assertThat(done.status()).as(argument).isEqualTo(InstanceStatus.DONE);
                assertThat(done.resultJson()).isEqualTo(argument.equals("old") ? "\"was done\"" : "\"" + argument + "\"");
            });
            long parked = Sql.query(db, "SELECT id FROM {schema}.durable_instances WHERE type = 'greeting'",
                    row -> row.get(0, Long.class)).get(0);
            engine.signal("greeting-1", "go", null, null).block(WAIT);
            Instance greeted = engine.awaitSettled(parked, Duration.ofSeconds(30)).block(WAIT);
            assertThat(greeted.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(greeted.resultJson()).isEqualTo("\"hello ada\"");
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    /**
     * Version 2 collects the signals version 1's settles could leave behind (their instance gone),
     * and no others; from then on a row takes its signals with it however it goes.
     */
    @Test
    void version2CollectsTheSignalsVersion1LeftAndRowsTakeTheirSignalsFromThenOn(TestDatabase db) {
        try (TestDatabase upgraded = TestPostgres.newDatabase("signals_v2")) {
            Db sql = new Db(db.connectionFactory(), WAIT);
            Migrator migrator = new Migrator(sql, upgraded.schema());
            assertThat(migrator.migrate(1).block(WAIT)).isEqualTo(1);
            String schema = '"' + upgraded.schema() + '"';
            upgraded.execute("SET search_path TO " + schema + ";"
                    + " INSERT INTO durable_instances (id, type, queue, step, max_attempts, has_signals)"
                    + " VALUES (1, 'flow', 'q', 'wait', 1, true), (2, 'flow', 'q', 'wait', 1, true);"
                    + " INSERT INTO durable_signals (instance_id, name) VALUES (1, 'kept'), (3, 'left'), (2, 'gone');");
            assertThat(migrator.migrate(2).block(WAIT)).isEqualTo(2);
            assertThat(Sql.query(db, "SELECT name FROM " + schema + ".durable_signals ORDER BY id",
                    row -> row.get(0, String.class))).containsExactly("kept", "gone");

            upgraded.execute("DELETE FROM " + schema + ".durable_instances WHERE id = 2");
            assertThat(Sql.query(db, "SELECT name FROM " + schema + ".durable_signals ORDER BY id",
                    row -> row.get(0, String.class))).containsExactly("kept");
        }
    }

    /**
     * A release's next version applies on top of the newest shipped one alone (the earlier ones are
     * not run again), over rows, and its undo takes back only what it did.
     */
    @Test
    void aLaterVersionAppliesOnTopOfTheBaseline(TestDatabase db) {
        try (TestDatabase probed = TestPostgres.newDatabase("later_version")) {
            Db sql = new Db(db.connectionFactory(), WAIT);
            assertThat(new Migrator(sql, probed.schema()).migrate().block(WAIT)).isEqualTo(LATEST);
            probed.execute("INSERT INTO \"" + probed.schema() + "\".durable_engines (origin, name, queues, types, versions,"
                    + " expires_at) VALUES ('e', 'e', '{}', '{}', '{}', now())");

            Migrator later = new Migrator(sql, probed.schema(), WITH_PROBE);
            assertThat(later.migrate().block(WAIT)).isEqualTo(LATEST + 1);
            assertThat(Sql.query(db, "SELECT version || ' ' || description FROM \"" + probed.schema()
                    + "\".durable_schema_version ORDER BY version", row -> row.get(0, String.class)))
                    .containsExactly("1 baseline", "2 signals_leave_with_their_instance",
                            "3 key_election_survives_a_deleted_choice", "4 queue_minutes_and_shared_secrets",
                            "5 claims_know_their_transaction", "6 claims_in_a_ledger", "7 probe");
            assertThat(Sql.query(db, "SELECT probe FROM \"" + probed.schema() + "\".durable_engines",
                    row -> row.get(0, String.class))).containsExactly("added by V7");

            assertThat(later.migrateDown(LATEST).block(WAIT)).isEqualTo(LATEST);
            assertThat(Sql.query(db, "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1"
                    + " AND column_name = 'probe'", row -> row.get(0, Long.class), probed.schema())).containsExactly(0L);
            assertThat(Sql.query(db, "SELECT count(*) FROM \"" + probed.schema() + "\".durable_engines",
                    row -> row.get(0, Long.class))).containsExactly(1L);
            assertThat(new Migrator(sql, probed.schema()).migrate().block(WAIT)).isEqualTo(LATEST);
        }
    }

    /**
     * A schema a newer Durable migrated (here to the test's probe version) is neither migrated, nor undone, nor
     * started on by this library: each says so with a typed error, and leaves the schema as it was.
     */
    @Test
    void aSchemaNewerThanTheLibraryIsRefused(TestDatabase db) {
        try (TestDatabase newer = TestPostgres.newDatabase("newer_schema")) {
            Db sql = new Db(db.connectionFactory(), WAIT);
            assertThat(new Migrator(sql, newer.schema(), WITH_PROBE).migrate().block(WAIT)).isEqualTo(LATEST + 1);
            Migrator ours = new Migrator(sql, newer.schema());

            assertThatThrownBy(() -> ours.migrate().block(WAIT)).isInstanceOfSatisfying(SchemaVersionException.class,
                    refused -> {
                        assertThat(refused.recordedVersion()).isEqualTo(LATEST + 1);
                        assertThat(refused.knownVersion()).isEqualTo(LATEST);
                        assertThat(refused).hasMessageContaining("\"" + newer.schema() + "\" is at version " + (LATEST + 1)
                                + " ('probe'), newer than the newest this library ships, " + LATEST)
                                .hasMessageContaining("applyMigrations(false)");
                    });
            assertThatThrownBy(() -> ours.migrateDown(0).block(WAIT)).isInstanceOf(SchemaVersionException.class);
            DurableEngine engine = DurableEngine.builder(newer.engineOptions().name("older").build()).build();
            try {
                assertThatThrownBy(() -> engine.start().block(WAIT)).isInstanceOf(SchemaVersionException.class);
                assertThatThrownBy(() -> engine.migrate().block(WAIT)).isInstanceOf(SchemaVersionException.class);
            } finally {
                engine.closeLater().block(WAIT);
            }
            assertThat(ours.version().block(WAIT)).isEqualTo(LATEST + 1);
            assertThat(Sql.query(db, "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1"
                    + " AND column_name = 'probe'", row -> row.get(0, Long.class), newer.schema())).containsExactly(1L);
        }
    }

    /**
     * A developer's schema from before the first release records versions 1 to 16 under their own
     * names: refused, with what to do. At version 16 its tables are the baseline's
     * ({@link BaselineCatalogIT}), so recording it as the baseline, as the message says, is enough for
     * an engine to run on it. An older pre-release schema is refused by its version 1's name alone.
     */
    @Test
    void aPreReleaseSchemaIsRefusedWithWhatToDo(TestDatabase db) {
        Db sql = new Db(db.connectionFactory(), WAIT);
        try (TestDatabase preRelease = TestPostgres.newDatabase("pre_release_16");
                TestDatabase older = TestPostgres.newDatabase("pre_release_1")) {
            assertThat(new Migrator(sql, preRelease.schema(), BaselineCatalogIT.PRE_RELEASE).migrate().block(WAIT))
                    .isEqualTo(16);
            assertThatThrownBy(() -> new Migrator(sql, preRelease.schema()).migrate().block(WAIT))
                    .isInstanceOfSatisfying(SchemaVersionException.class, refused -> {
                        assertThat(refused.recordedVersion()).isEqualTo(16);
                        assertThat(refused.knownVersion()).isEqualTo(LATEST);
                        assertThat(refused).hasMessageContaining("records version 1 as 'durable_schema' (and versions"
                                        + " up to 16), but this library's version 1 is 'baseline'")
                                .hasMessageContaining("recording it as version 1 'baseline' instead is enough");
                    });

            preRelease.execute("DELETE FROM \"" + preRelease.schema() + "\".durable_schema_version;"
                    + " INSERT INTO \"" + preRelease.schema() + "\".durable_schema_version (version, description)"
                    + " VALUES (1, 'baseline')");
            DurableEngine engine = DurableEngine.builder(preRelease.engineOptions().name("adopted")
                            .queue(QueueOptions.builder("adopted").pollInterval(Duration.ofMillis(100)).build()).build())
                    .register(JobDefinition.of("echo", String.class, (String s) -> Mono.just(s)).queue("adopted"))
                    .build();
            try {
                engine.start().block(WAIT);
                long id = engine.insert(JobRequest.of("echo", "adopted")).block(WAIT);
                assertThat(engine.awaitSettled(id, Duration.ofSeconds(30)).block(WAIT).resultJson())
                        .isEqualTo("\"adopted\"");
            } finally {
                engine.closeLater().block(WAIT);
            }

            assertThat(new Migrator(sql, older.schema(), BaselineCatalogIT.PRE_RELEASE).migrate(1).block(WAIT))
                    .isEqualTo(1);
            assertThatThrownBy(() -> new Migrator(sql, older.schema()).migrate().block(WAIT))
                    .isInstanceOf(SchemaVersionException.class)
                    .hasMessageContaining("records version 1 as 'durable_schema' (and versions up to 1)");
        }
    }

    /** Each table of the schema (the version record aside) and its row count. */
    private static Map<String, Long> rowCounts(TestDatabase db) {
        Map<String, Long> counts = new LinkedHashMap<>();
        for (String table : Sql.query(db, "SELECT tablename::text FROM pg_tables WHERE schemaname = $1"
                + " AND tablename <> 'durable_schema_version' ORDER BY tablename", row -> row.get(0, String.class),
                db.schema())) {
            counts.put(table, Sql.query(db, "SELECT count(*) FROM {schema}." + table, row -> row.get(0, Long.class))
                    .get(0));
        }
        return counts;
    }

    private static String resource(String name) {
        try (InputStream in = MigratorIT.class.getResourceAsStream(name)) {
            return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
