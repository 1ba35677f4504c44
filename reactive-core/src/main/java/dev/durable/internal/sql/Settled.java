package dev.durable.internal.sql;

import org.jspecify.annotations.Nullable;

/**
 * Settled instances and the history table they move to: the one place that knows its columns.
 *
 * <p>A statement that may settle rows does it in three data-modifying CTEs of its own statement,
 * so the move is atomic with the decision: {@link #move} deletes the rows that settle from the hot
 * table (the delete triggers count a child off its parent, give a gate slot back and delete the
 * row's signals: a settled instance is no signal's target any more), and inserts them into the
 * history table with their final values and the names of the signals its steps consumed (in
 * delivery order). The signals are not deleted here: this statement's snapshot misses a signal
 * whose delivery locked the row first and committed while this statement waited for it, and the
 * trigger's own statement sees it. Rows whose correlation key stays occupied in their final status
 * are not moved: the hot table's unique index must keep holding the key, so the statement updates
 * them in place like any other transition ({@link #settlesWhere} is false for them).
 */
final class Settled {

    /** The history table's columns, in the order {@link #move} inserts them. */
    private static final String COLUMNS = "id, type, type_version, queue, priority, status, step, state, result,"
            + " last_error, attempt, max_attempts, eligible_at, parent_id, concurrency_key, correlation_key,"
            + " inserted_at, signals, gate_name, gate_shard, rate_limit, rate_weight, rate_partition, trace_context,"
            + " trace_last, fairness_key, window_name, window_weight, window_partition";

    private Settled() {
    }

    /**
     * True when the hot-table row {@code i} settles with {@code status} and may leave: a terminal
     * status that does not keep its correlation key occupied.
     */
    static String settlesWhere(String status) {
        return "(" + status + ") IN ('done', 'failed', 'cancelled') AND NOT (i.correlation_key IS NOT NULL AND ("
                + status + ") = ANY (i.correlation_statuses))";
    }

    /**
     * The CTEs {@code moved} and {@code archived}: deletes the rows of
     * {@code {instances} i} joined to {@code using} (none when null) that match {@code where} and settle with
     * {@code status}, archives them with the given final values (SQL expressions over {@code i} and
     * the {@code using} relations) and the limits they ran under (so a retry in place keeps them).
     * {@code moved} returns id, queue and
     * the final status, for the statement's answer.
     */
    static String move(String using, String where, String status, String step, String state, String result,
            String error, String attempt) {
        return move(using, where, status, step, state, result, error, attempt, "i.trace_last");
    }

    /** As above, with the span context of the instance's last run as {@code traceLast} (a settling run's own). */
    static String move(@Nullable String using, String where, String status, String step, String state,
            String result, String error, String attempt, String traceLast) {
        return """
                moved AS (
                    DELETE FROM {instances} i%s
                     WHERE %s AND %s
                    RETURNING i.id, i.type, i.type_version, i.queue, i.priority, %s AS status, %s AS step,
                              %s AS state, %s AS result, %s AS last_error, %s AS attempt, i.max_attempts,
                              i.eligible_at, i.parent_id, i.concurrency_key, i.correlation_key, i.inserted_at,
                              CASE WHEN i.has_signals THEN ARRAY(
                                  SELECT s.name FROM {signals} s
                                   WHERE s.instance_id = i.id AND s.consumed_at IS NOT NULL ORDER BY s.id)
                              END AS signals,
                              i.gate_name, i.gate_shard, i.rate_limit, i.rate_weight, i.rate_partition,
                              i.trace_context, %s AS trace_last, i.fairness_key,
                              i.window_name, i.window_weight, i.window_partition
                ), archived AS (
                    INSERT INTO {history} (%s) SELECT %s FROM moved
                )""".formatted(using == null ? "" : " USING " + using, where, settlesWhere(status), status, step, state, result, error, attempt,
                traceLast, COLUMNS, COLUMNS);
    }
}
