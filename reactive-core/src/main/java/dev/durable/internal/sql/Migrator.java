package dev.durable.internal.sql;

import dev.durable.DurableException;
import dev.durable.internal.Db;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Applies Durable's versioned migrations over R2DBC. All of it runs in one transaction under a
 * transaction-scoped advisory lock keyed by the schema, so engines starting together apply each
 * version exactly once and a failed migration leaves nothing half done (PostgreSQL DDL is
 * transactional). The files are plain Flyway-named SQL with unqualified names, run with
 * {@code search_path} set to the schema.
 */
public final class Migrator {

    private static final Logger log = Loggers.getLogger(Migrator.class);

    /** Every migration, in order. A new version adds a line here and its V and U files. */
    static final List<Migration> MIGRATIONS = List.of(new Migration(1, "durable_schema"),
            new Migration(2, "engine_registry"), new Migration(3, "settled_history"),
            new Migration(4, "admin"), new Migration(5, "queue_pauses"), new Migration(6, "conflict_policies"),
            new Migration(7, "workflow_versions"), new Migration(8, "replay"), new Migration(9, "trace_context"),
            new Migration(10, "fair_share"), new Migration(11, "limit_permits"), new Migration(12, "stacked_limits"),
            new Migration(13, "key_waiting"), new Migration(14, "plain_job_cost"), new Migration(15, "fair_key_caps"),
            new Migration(16, "key_election_bounded"));

    /** Advisory lock class for Durable's migrations; the object id is the schema's hash. */
    private static final int LOCK_CLASS = 0x0D0AB1E;

    record Migration(int version, String description) {

        String upResource() {
            return "/dev/durable/migrations/V" + version + "__" + description + ".sql";
        }

        String downResource() {
            return "/dev/durable/migrations/U" + version + "__" + description + ".sql";
        }
    }

    /**
     * Serialises migrations of one schema across engines: a transaction-scoped advisory lock keyed
     * by the schema, released when the migration's transaction ends. Locks: the advisory lock only.
     */
    private static final String LOCK = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

    private final Db db;
    private final String schema;
    /** Creates the schema on first use. Index: none. Locks: the catalog's, under the advisory lock. */
    private final String createSchema;
    /** The table recording applied versions, created on first use. Index: none. Locks: the catalog's. */
    private final String createVersionTable;
    /** The version recorded, 0 when none. Index: the table's primary key (a handful of rows). Locks: none. */
    private final String currentVersion;
    /** Records an applied version. Index: primary key. Locks: the new row. */
    private final String recordVersion;
    /** Forgets an undone version. Index: primary key. Locks: the deleted row. */
    private final String forgetVersion;
    /** The script's unqualified names land in our schema for the rest of the transaction. No I/O on tables. */
    private final String setSearchPath;
    /** The scripts by resource name, read once here so no reactive thread reads the jar. */
    private final java.util.Map<String, String> scripts = new java.util.HashMap<>();

    /**
     * A migration may rewrite a big table: it gets a generous bound of its own, and lifts the
     * server's statement timeout for its transaction only.
     */
    private static final java.time.Duration MIGRATION_TIMEOUT = java.time.Duration.ofMinutes(30);
    private static final String NO_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = 0";

    public Migrator(Db db, String schema) {
        this.db = db.withTimeout(MIGRATION_TIMEOUT);
        this.schema = schema;
        String quotedSchema = '"' + schema + '"';
        String versionTable = quotedSchema + ".durable_schema_version";
        this.createSchema = "CREATE SCHEMA IF NOT EXISTS " + quotedSchema;
        this.createVersionTable = "CREATE TABLE IF NOT EXISTS " + versionTable
                + " (version integer PRIMARY KEY, description text NOT NULL,"
                + " applied_at timestamptz NOT NULL DEFAULT now())";
        this.currentVersion = "SELECT coalesce(max(version), 0) FROM " + versionTable;
        this.recordVersion = "INSERT INTO " + versionTable + " (version, description) VALUES ($1, $2)";
        this.forgetVersion = "DELETE FROM " + versionTable + " WHERE version = $1";
        this.setSearchPath = "SET LOCAL search_path TO " + quotedSchema;
        for (Migration migration : MIGRATIONS) {
            scripts.put(migration.upResource(), readResource(migration.upResource()));
            scripts.put(migration.downResource(), readResource(migration.downResource()));
        }
    }

    /** The newest version this library ships. */
    public static int latestVersion() {
        return MIGRATIONS.get(MIGRATIONS.size() - 1).version();
    }

    /** Applies every migration newer than the recorded version; returns the version after. */
    public Mono<Integer> migrate() {
        return db.inTransaction(connection -> lockAndPrepare(connection)
                .then(currentVersion(connection))
                .flatMap(current -> Flux.fromIterable(MIGRATIONS)
                        .filter(migration -> migration.version() > current)
                        .concatMap(migration -> apply(connection, migration, migration.upResource())
                                .then(Db.execute(connection, recordVersion, migration.version(),
                                        migration.description()))
                                .doOnSuccess(done -> log.info("applied Durable migration V{} to schema {}",
                                        migration.version(), schema))
                                .thenReturn(migration.version()))
                        .last(current)))
                .single();
    }

    /**
     * Undoes every applied migration above {@code target} (0 removes every table), newest first.
     * For tests and for removing Durable; the schema itself is left in place.
     */
    public Mono<Integer> migrateDown(int target) {
        return db.inTransaction(connection -> lockAndPrepare(connection)
                .then(currentVersion(connection))
                .flatMap(current -> Flux.fromIterable(MIGRATIONS)
                        .filter(migration -> migration.version() > target && migration.version() <= current)
                        .sort((a, b) -> Integer.compare(b.version(), a.version()))
                        .concatMap(migration -> apply(connection, migration, migration.downResource())
                                .then(Db.execute(connection, forgetVersion, migration.version())))
                        .then(Mono.just(Math.min(current, target)))))
                .single();
    }

    /** The version recorded in the schema, 0 when none is. */
    public Mono<Integer> version() {
        return db.inTransaction(connection -> lockAndPrepare(connection).then(currentVersion(connection)))
                .single();
    }

    private Mono<Void> lockAndPrepare(io.r2dbc.spi.Connection connection) {
        return Db.execute(connection, NO_STATEMENT_TIMEOUT)
                .then(Db.execute(connection, LOCK, LOCK_CLASS, schema))
                .then(Db.execute(connection, createSchema))
                .then(Db.execute(connection, createVersionTable));
    }

    private Mono<Integer> currentVersion(io.r2dbc.spi.Connection connection) {
        return Flux.from(connection.createStatement(currentVersion).execute())
                .flatMap(result -> result.map((row, meta) -> row.get(0, Integer.class)))
                .single();
    }

    private Mono<Void> apply(io.r2dbc.spi.Connection connection, Migration migration, String resource) {
        // SET LOCAL lasts to the end of this transaction: the script's unqualified names land in
        // our schema, as they would under Flyway's default schema.
        return Db.execute(connection, setSearchPath)
                .then(Db.executeScript(connection, scripts.get(resource)))
                .onErrorMap(error -> !(error instanceof DurableException),
                        error -> new DurableException("migration V" + migration.version() + " ("
                                + resource + ") failed on schema " + schema + ": " + error.getMessage(), error));
    }

    private static String readResource(String resource) {
        try (InputStream in = Migrator.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("migration resource missing from the jar: " + resource);
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
