package dev.durable.internal.sql;

import dev.durable.InstanceStatus;
import dev.durable.internal.Db;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The admin's counts of instances by queue and status: the live rows counted, the history counted
 * while it is small and estimated from its statistics once it is big. Locks: none.
 */
public final class StatusCountSql {

    /** One (queue, status) count from the hot table, the history, or the history's statistics. */
    public record Count(String queue, InstanceStatus status, long count) {
    }

    private final Db db;
    private final String schema;

    /** Live rows by queue and status. Index: none, a scan of the hot table (its rows are the live ones). Locks: none. */
    private final String countLive;

    /** Settled rows by queue and status, exactly. Index: a scan of the history; only for a small history. Locks: none. */
    private final String countSettled;

    /** The planner's row count of the history (-1 before its first VACUUM or ANALYZE). Index: pg_class's oid. */
    private final String historyRows;

    /**
     * The most common (queue, status) combinations of the history with their frequencies, as ANALYZE
     * last sampled them (extended statistics durable_history_queue_status). Reads a catalog row.
     */
    private final String settledEstimate;

    public StatusCountSql(Db db, Tables tables, String schema) {
        this.db = db;
        this.schema = schema;
        this.countLive = tables.render("SELECT queue, status, count(*) FROM {instances} GROUP BY queue, status");
        this.countSettled = tables.render("SELECT queue, status, count(*) FROM {history} GROUP BY queue, status");
        this.historyRows = "SELECT c.reltuples::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = $1 AND c.relname = 'durable_history'";
        this.settledEstimate = """
                SELECT s.most_common_vals[k][1] AS queue, s.most_common_vals[k][2] AS status,
                       s.most_common_freqs[k] AS freq
                  FROM pg_stats_ext s, generate_subscripts(s.most_common_freqs, 1) k
                 WHERE s.schemaname = $1 AND s.tablename = 'durable_history'
                   AND s.statistics_name = 'durable_history_queue_status'""";
    }

    public Flux<Count> countLive() {
        return counts(countLive);
    }

    public Flux<Count> countSettled() {
        return counts(countSettled);
    }

    /** The planner's estimate of the history's rows, -1 when it has none yet. */
    public Mono<Long> historyRows() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(historyRows).bind(0, schema)
                        .execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))).next().defaultIfEmpty(-1L);
    }

    /** The settled counts estimated from the statistics times {@code rows}; empty when ANALYZE has not run. */
    public Flux<Count> estimateSettled(long rows) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(settledEstimate).bind(0, schema)
                        .execute())
                .concatMap(result -> result.map(row -> new Count(row.get("queue", String.class),
                        InstanceStatus.fromSql(row.get("status", String.class)),
                        Math.round(row.get("freq", Double.class) * rows)))));
    }

    private Flux<Count> counts(String sql) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql).execute())
                .concatMap(result -> result.map(row -> new Count(row.get(0, String.class),
                        InstanceStatus.fromSql(row.get(1, String.class)), row.get(2, Long.class)))));
    }
}
