package dev.durable.internal.sql;

import dev.durable.internal.Db;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The dead rows of the hot tables, and their VACUUM. A hot table is a queue: each job inserts a
 * row, updates it when claimed and deletes it when settled, so it leaves two dead versions behind
 * it, and the picks and claims step over their index entries until a vacuum removes them.
 * Autovacuum comes by once per {@code autovacuum_naptime} (a minute by default, a server-wide
 * setting) however low the table's own threshold is; at 20,000 jobs a second that is more than
 * two million dead versions, a hot table of 300 MB for 18,000 live rows and picks that cost four
 * times as much (benchmarks/README.md, "Sustained load").
 */
public final class VacuumSql {

    /**
     * The hot tables ({@link StatisticsSql#HOT_TABLES}) holding at least $3 dead tuples, with whether
     * this role may VACUUM them. Reads the cumulative statistics (flushed by each backend within a
     * second or so) and pg_class: a few catalog rows, no lock on the tables.
     */
    private static final String DEAD = "SELECT s.relname, s.n_dead_tup, " + StatisticsSql.MAY_MAINTAIN
            + ", current_user::text" + """

              FROM pg_stat_user_tables s
              JOIN pg_class c ON c.oid = s.relid
             WHERE s.schemaname = $1 AND s.relname = ANY ($2::text[]) AND s.n_dead_tup >= $3
             ORDER BY s.n_dead_tup DESC""";

    /**
     * One hot table's dead tuples ($1 the schema, $2 the table). Right after a VACUUM it is what the
     * VACUUM reported leaving: the dead tuples some snapshot may still see.
     */
    private static final String DEAD_ROWS = """
            SELECT s.n_dead_tup FROM pg_stat_user_tables s WHERE s.schemaname = $1 AND s.relname = $2""";

    /** A hot table with {@code deadRows} dead tuples, and whether this role ({@code role}) may VACUUM it. */
    public record Dead(String table, long deadRows, boolean mayVacuum, String role) {
    }

    private final Db db;
    private final Tables tables;
    private final String schema;

    public VacuumSql(Db db, String schema) {
        this.db = db;
        this.schema = schema;
        this.tables = new Tables(schema);
    }

    /** {@code table}, one of the hot tables, as written in SQL: schema-qualified and quoted. */
    public String qualified(String table) {
        return tables.table(table);
    }

    /** The hot tables with at least {@code minDead} dead tuples, most first. */
    public Mono<List<Dead>> dead(long minDead, Duration timeout) {
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(DEAD).bind(0, schema)
                                .bind(1, StatisticsSql.HOT_TABLES.toArray(String[]::new)).bind(2, minDead)
                                .execute()))
                        .concatMap(result -> result.map(row -> new Dead(row.get(0, String.class),
                                row.get(1, Long.class), Boolean.TRUE.equals(row.get(2, Boolean.class)),
                                String.valueOf(row.get(3, String.class))))))
                .collectList();
    }

    /**
     * VACUUMs {@code table}, one of the hot tables, unless another session holds a conflicting lock:
     * autovacuum's, or another node's VACUUM of it (SKIP_LOCKED: the next tick looks again). Emits
     * the table's dead tuples it left (those a snapshot still sees), so the caller can tell a held
     * xmin from new garbage.
     *
     * <p>TRUNCATE false: truncating a drained table's empty tail takes an ACCESS EXCLUSIVE lock that
     * every insert, pick and settle would wait on (and a standby would replay); the pages are reused
     * by the next inserts anyway. So the lock it takes is SHARE UPDATE EXCLUSIVE, which none of them
     * waits on. VACUUM cannot run in a transaction, so it runs in auto-commit mode with the
     * connection's {@code statement_timeout} set to {@code timeout} for it and set back to what it
     * was after, also when it fails; a cancelled VACUUM's connection is discarded, and the server
     * stops it at that timeout.
     */
    public Mono<Long> vacuum(String table, Duration timeout) {
        if (!StatisticsSql.HOT_TABLES.contains(table)) {
            return Mono.error(new IllegalArgumentException("not a hot table: " + table));
        }
        String vacuum = "VACUUM (SKIP_LOCKED, TRUNCATE false) " + tables.table(table);
        // The pool's own bound on a call would cut a long VACUUM before the task's timeout does.
        return db.withTimeout(timeout.plusSeconds(5)).withConnection(connection -> Flux.from(connection
                        .createStatement("SELECT current_setting('statement_timeout')").execute())
                        .concatMap(result -> result.map(row -> row.get(0, String.class)))
                        .next()
                        .flatMap(previous -> {
                            Mono<Void> restore = setTimeout(connection, previous);
                            return setTimeout(connection, Math.max(1, timeout.toMillis()) + "ms")
                                    .then(Db.execute(connection, vacuum))
                                    .then(restore)
                                    .then(deadRows(connection, table))
                                    .onErrorResume(error -> restore.onErrorResume(failed -> Mono.empty())
                                            .then(Mono.error(error)));
                        }))
                .next();
    }

    private static Mono<Void> setTimeout(Connection connection, String value) {
        return Flux.from(connection.createStatement("SELECT set_config('statement_timeout', $1, false)")
                        .bind(0, value).execute())
                .concatMap(result -> result.map(row -> 1))
                .then();
    }

    private Mono<Long> deadRows(Connection connection, String table) {
        return Flux.from(connection.createStatement(DEAD_ROWS).bind(0, schema).bind(1, table).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))
                .next()
                .defaultIfEmpty(0L);
    }
}
