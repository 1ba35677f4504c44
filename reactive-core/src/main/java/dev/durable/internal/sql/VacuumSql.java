package dev.durable.internal.sql;

import dev.durable.internal.Db;
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
 * two million dead versions, a hot table ten times its live size and picks that cost four times as
 * much (benchmarks/README.md, "Sustained load").
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
     * autovacuum's, or another node's VACUUM of it (SKIP_LOCKED: the next tick looks again). VACUUM
     * cannot run in a transaction, so it runs in auto-commit mode with the connection's
     * {@code statement_timeout} set to {@code timeout} for it and reset after, also when it fails.
     * It takes the lock a VACUUM takes (SHARE UPDATE EXCLUSIVE), which no insert, claim or settle
     * waits on.
     */
    public Mono<Void> vacuum(String table, Duration timeout) {
        if (!StatisticsSql.HOT_TABLES.contains(table)) {
            return Mono.error(new IllegalArgumentException("not a hot table: " + table));
        }
        String vacuum = "VACUUM (SKIP_LOCKED) " + tables.table(table);
        String bound = "SET statement_timeout = " + Math.max(1, timeout.toMillis());
        return db.withTimeout(timeout.plusSeconds(5)).withConnection(connection -> {
            Mono<Void> reset = Db.execute(connection, "RESET statement_timeout");
            return Db.execute(connection, bound)
                    .then(Db.execute(connection, vacuum))
                    .then(reset)
                    .onErrorResume(error -> reset.onErrorResume(resetError -> Mono.empty()).then(Mono.error(error)));
        }).then();
    }
}
