package dev.durable.internal.sql;

import dev.durable.internal.Db;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The planner statistics of the tables the hot statements plan over. Those statements are prepared
 * and keep a generic plan, made with the statistics of the moment; made while a table looked empty
 * (a fresh install, a queue that drained and was analyzed empty), that plan scans the table and is
 * kept after the table fills, until an ANALYZE of it drops the plan. Autoanalyze does that within
 * {@code autovacuum_naptime} at best; this does it on the engine's tick.
 */
public final class StatisticsSql {

    /**
     * The tables the hot statements read whose size follows the backlog: instances (picks, commits,
     * heartbeats), the inbox (commits re-check it), fair keys (the fair pick), gate slots and permits
     * (the limited picks); and the ledger of claims, which every pick writes (by trigger) and the
     * reaper empties, so its dead rows come at the pick rate.
     */
    static final List<String> HOT_TABLES = List.of("durable_instances", "durable_signals", "durable_fair_keys",
            "durable_gate_slots", "durable_limit_permits", "durable_claims");

    /**
     * Whether this role may ANALYZE or VACUUM the table {@code c} (a pg_class row): the table's or the
     * database's owner's privileges, or MAINTAIN on PostgreSQL 17.
     */
    static final String MAY_MAINTAIN = """
            (pg_has_role(c.relowner, 'USAGE')
                   OR pg_has_role((SELECT d.datdba FROM pg_database d WHERE d.datname = current_database()), 'USAGE')
                   OR CASE WHEN current_setting('server_version_num')::int >= 170000
                           THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END)""";

    /**
     * The hot tables with at least $3 live tuples and more than $4 times as many as their statistics
     * say ({@code reltuples}, -1 when never analyzed), with whether this role may ANALYZE them (the
     * table's or the database's owner's privileges, or MAINTAIN on PostgreSQL 17). A table that shrank is left alone: plans made
     * for more rows stay cheap over fewer, and an ANALYZE of a drained table is what makes the bad plan.
     * Reads the cumulative statistics (live tuples, flushed by each backend within a second or so) and
     * pg_class: a few catalog rows, no lock on the tables.
     */
    private static final String STALE = "SELECT s.relname, " + MAY_MAINTAIN + ", current_user::text" + """

              FROM pg_stat_user_tables s
              JOIN pg_class c ON c.oid = s.relid
             WHERE s.schemaname = $1 AND s.relname = ANY ($2::text[])
               AND s.n_live_tup >= $3 AND s.n_live_tup > $4 * greatest(c.reltuples, 0)
             ORDER BY s.relname""";

    /** A table whose statistics are behind its contents, and whether this role ({@code role}) may ANALYZE it. */
    public record Stale(String table, boolean mayAnalyze, String role) {
    }

    private final Db db;
    private final Tables tables;
    private final String schema;

    public StatisticsSql(Db db, String schema) {
        this.db = db;
        this.schema = schema;
        this.tables = new Tables(schema);
    }

    /** {@code table}, one of the hot tables, as written in SQL: schema-qualified and quoted. */
    public String qualified(String table) {
        return tables.table(table);
    }

    /** The hot tables with at least {@code minRows} live rows, more than {@code growth} times their statistics. */
    public Mono<List<Stale>> stale(long minRows, double growth, Duration timeout) {
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(STALE).bind(0, schema)
                                .bind(1, HOT_TABLES.toArray(String[]::new)).bind(2, minRows).bind(3, growth)
                                .execute()))
                        .concatMap(result -> result.map(row -> new Stale(row.get(0, String.class),
                                Boolean.TRUE.equals(row.get(1, Boolean.class)),
                                String.valueOf(row.get(2, String.class))))))
                .collectList();
    }

    /**
     * ANALYZEs {@code table}, one of the hot tables, unless another session holds a conflicting lock:
     * another node's ANALYZE of it, or autovacuum's (SKIP_LOCKED: the next tick looks again). Its
     * commit drops the plans every session cached over it, so they are made again with the new
     * statistics.
     */
    public Mono<Void> analyze(String table, Duration timeout) {
        if (!HOT_TABLES.contains(table)) {
            return Mono.error(new IllegalArgumentException("not a hot table: " + table));
        }
        String analyze = "ANALYZE (SKIP_LOCKED) " + tables.table(table);
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(analyze).execute())
                                .concatMap(result -> result.getRowsUpdated())))
                .then();
    }
}
