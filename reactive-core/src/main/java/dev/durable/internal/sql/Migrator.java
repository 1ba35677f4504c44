package dev.durable.internal.sql;

import dev.durable.DurableException;
import dev.durable.SchemaVersionException;
import dev.durable.internal.Db;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
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
 *
 * <p>Version 1 is the baseline: the whole schema as the first release ships it, one file to read
 * top to bottom ({@code V1__baseline.sql}). A change after it is a new version applied on top (its V
 * file, its U file that undoes it, and a line in {@link #MIGRATIONS}); a released file never changes.
 * Before anything is applied or undone, the history recorded in the schema is checked against this
 * library's: a schema at a version newer than this library ships, or one that records a version
 * under another description (another history made it), is refused with {@link SchemaVersionException},
 * never migrated by guess.
 */
public final class Migrator {

    private static final Logger log = Loggers.getLogger(Migrator.class);

    /** Where the shipped migrations are (in the jar). */
    static final String SHIPPED = "/dev/durable/migrations/";

    /** Every migration, in order. A new version adds a line here and its V and U files. */
    static final List<Migration> MIGRATIONS = List.of(new Migration(1, "baseline", SHIPPED),
            new Migration(2, "signals_leave_with_their_instance", SHIPPED),
            new Migration(3, "key_election_survives_a_deleted_choice", SHIPPED),
            new Migration(4, "queue_minutes_and_shared_secrets", SHIPPED),
            new Migration(5, "claims_know_their_transaction", SHIPPED),
            new Migration(6, "claims_in_a_ledger", SHIPPED));

    /** Advisory lock class for Durable's migrations; the object id is the schema's hash. */
    private static final int LOCK_CLASS = 0x0D0AB1E;

    /** One version: its number, its description (the file names' tail) and the resource folder of its files. */
    record Migration(int version, String description, String directory) {

        String upResource() {
            return directory + "V" + version + "__" + description + ".sql";
        }

        String downResource() {
            return directory + "U" + version + "__" + description + ".sql";
        }
    }

    /** A version as the schema recorded it. */
    private record Recorded(int version, String description) {
    }

    /**
     * Serialises migrations of one schema across engines: a transaction-scoped advisory lock keyed
     * by the schema, released when the migration's transaction ends. Locks: the advisory lock only.
     */
    private static final String LOCK = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

    private final Db db;
    private final String schema;
    private final List<Migration> migrations;
    /** Creates the schema on first use. Index: none. Locks: the catalog's, under the advisory lock. */
    private final String createSchema;
    /** The table recording applied versions, created on first use. Index: none. Locks: the catalog's. */
    private final String createVersionTable;
    /** The version recorded, 0 when none. Index: the table's primary key (a handful of rows). Locks: none. */
    private final String currentVersion;
    /** The versions recorded, in order. Index: the table's primary key (a handful of rows). Locks: none. */
    private final String history;
    /** Records an applied version. Index: primary key. Locks: the new row. */
    private final String recordVersion;
    /** Forgets an undone version. Index: primary key. Locks: the deleted row. */
    private final String forgetVersion;
    /** The script's unqualified names land in our schema for the rest of the transaction. No I/O on tables. */
    private final String setSearchPath;
    /** The scripts by resource name, read once here so no reactive thread reads the jar (an undo may be absent). */
    private final Map<String, String> scripts = new HashMap<>();

    /**
     * A migration may rewrite a big table: it gets a generous bound of its own, and lifts the
     * server's statement timeout for its transaction only.
     */
    private static final Duration MIGRATION_TIMEOUT = Duration.ofMinutes(30);
    private static final String NO_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = 0";

    public Migrator(Db db, String schema) {
        this(db, schema, MIGRATIONS);
    }

    /** A migrator of other versions than the shipped ones (tests: the pre-release history, a later version). */
    Migrator(Db db, String schema, List<Migration> migrations) {
        this.db = db.withTimeout(MIGRATION_TIMEOUT);
        this.schema = schema;
        this.migrations = List.copyOf(migrations);
        String quotedSchema = '"' + schema + '"';
        String versionTable = quotedSchema + ".durable_schema_version";
        this.createSchema = "CREATE SCHEMA IF NOT EXISTS " + quotedSchema;
        this.createVersionTable = "CREATE TABLE IF NOT EXISTS " + versionTable
                + " (version integer PRIMARY KEY, description text NOT NULL,"
                + " applied_at timestamptz NOT NULL DEFAULT now())";
        this.currentVersion = "SELECT coalesce(max(version), 0) FROM " + versionTable;
        this.history = "SELECT version, description FROM " + versionTable + " ORDER BY version";
        this.recordVersion = "INSERT INTO " + versionTable + " (version, description) VALUES ($1, $2)";
        this.forgetVersion = "DELETE FROM " + versionTable + " WHERE version = $1";
        this.setSearchPath = "SET LOCAL search_path TO " + quotedSchema;
        for (Migration migration : this.migrations) {
            scripts.put(migration.upResource(), readResource(migration.upResource(), true));
            String undo = readResource(migration.downResource(), false);
            if (undo != null) {
                scripts.put(migration.downResource(), undo);
            }
        }
    }

    /** The newest version this migrator knows. */
    int latestVersion() {
        return migrations.get(migrations.size() - 1).version();
    }

    /** Applies every migration newer than the recorded version; returns the version after. */
    public Mono<Integer> migrate() {
        return migrate(latestVersion());
    }

    /**
     * Applies the migrations newer than the recorded version up to {@code target}; returns the
     * version after (the recorded one when it is already at or past the target).
     */
    Mono<Integer> migrate(int target) {
        if (target < 0 || target > latestVersion()) {
            return Mono.error(new IllegalArgumentException("no migration to version " + target + ": this library"
                    + " ships versions 1 to " + latestVersion()));
        }
        return inMigration(connection -> lockAndPrepare(connection)
                .then(checkedVersion(connection))
                .flatMap(current -> Flux.fromIterable(migrations)
                        .filter(migration -> migration.version() > current && migration.version() <= target)
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
        return inMigration(connection -> lockAndPrepare(connection)
                .then(checkedVersion(connection))
                .flatMap(current -> Flux.fromIterable(migrations)
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

    /**
     * A migration's transaction: READ COMMITTED whatever the connection's default, since its statements
     * after the lock must see what committed before it (V6 records the rows executing once its triggers
     * hold claims off; under REPEATABLE READ its snapshot would predate the claims committed while it
     * waited for that lock).
     */
    private <T> Flux<T> inMigration(Function<Connection, ? extends Publisher<T>> work) {
        return db.inTransaction(IsolationLevel.READ_COMMITTED, work);
    }

    private Mono<Void> lockAndPrepare(Connection connection) {
        return Db.execute(connection, NO_STATEMENT_TIMEOUT)
                .then(Db.execute(connection, LOCK, LOCK_CLASS, schema))
                .then(Db.execute(connection, createSchema))
                .then(Db.execute(connection, createVersionTable));
    }

    private Mono<Integer> currentVersion(Connection connection) {
        return Flux.from(connection.createStatement(currentVersion).execute())
                .flatMap(result -> result.map((row, meta) -> row.get(0, Integer.class)))
                .single();
    }

    /** The recorded version, once the recorded history is found to be this library's (else the refusal). */
    private Mono<Integer> checkedVersion(Connection connection) {
        return Flux.from(connection.createStatement(history).execute())
                .flatMap(result -> result.map((row, meta) -> new Recorded(row.get(0, Integer.class),
                        row.get(1, String.class))))
                .collectList()
                .flatMap(recorded -> {
                    SchemaVersionException refused = refusal(recorded);
                    return refused != null ? Mono.error(refused)
                            : Mono.just(recorded.isEmpty() ? 0 : recorded.get(recorded.size() - 1).version());
                });
    }

    private @Nullable SchemaVersionException refusal(List<Recorded> recorded) {
        if (recorded.isEmpty()) {
            return null;
        }
        Recorded newest = recorded.get(recorded.size() - 1);
        for (Recorded version : recorded) {
            for (Migration ours : migrations) {
                if (ours.version() == version.version() && !ours.description().equals(version.description())) {
                    return new SchemaVersionException(("Durable's schema \"%s\" records version %d as '%s' (and"
                            + " versions up to %d), but this library's version %d is '%s': another history of"
                            + " Durable's migrations made it, such as a build from before the first release, whose"
                            + " versions 1 to 16 the baseline replaced. Its tables may not be what this library's"
                            + " statements expect, so it is neither migrated nor used. Drop Durable's tables there"
                            + " (or the schema) and start an engine to make them again, or keep using the build that"
                            + " made them (a pre-release schema at version 16 has exactly the baseline's tables:"
                            + " recording it as version 1 'baseline' instead is enough).").formatted(schema,
                            version.version(), version.description(), newest.version(), ours.version(),
                            ours.description()), newest.version(), latestVersion());
                }
            }
        }
        if (newest.version() > latestVersion()) {
            return new SchemaVersionException(("Durable's schema \"%s\" is at version %d ('%s'), newer than the"
                    + " newest this library ships, %d: a newer Durable migrated it, and an engine never migrates a"
                    + " schema down. Run a Durable that ships version %d or later; for a rolling deploy whose newer"
                    + " release says its schema still serves older engines, start this one with"
                    + " applyMigrations(false), which neither migrates nor checks.").formatted(schema,
                    newest.version(), newest.description(), latestVersion(), newest.version()), newest.version(),
                    latestVersion());
        }
        return null;
    }

    private Mono<Void> apply(Connection connection, Migration migration, String resource) {
        String script = scripts.get(resource);
        if (script == null) {
            return Mono.error(new DurableException("migration V" + migration.version() + " has no undo ("
                    + resource + "): schema " + schema + " cannot go below it"));
        }
        // SET LOCAL lasts to the end of this transaction: the script's unqualified names land in
        // our schema, as they would under Flyway's default schema.
        return Db.execute(connection, setSearchPath)
                .then(Db.executeScript(connection, script))
                .onErrorMap(error -> !(error instanceof DurableException),
                        error -> new DurableException("migration V" + migration.version() + " (" + resource
                                + ") failed on schema " + schema + ": " + error.getMessage(), error));
    }

    private static @Nullable String readResource(String resource, boolean required) {
        try (InputStream in = Migrator.class.getResourceAsStream(resource)) {
            if (in == null) {
                if (required) {
                    throw new IllegalStateException("migration resource missing from the jar: " + resource);
                }
                return null;
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
