package dev.durable.internal.sql;

import dev.durable.InstanceStatus;
import dev.durable.admin.QueuePause;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The admin's actions on instances by id (retry in place, run now, priority, delete) and the queues'
 * pauses. Each statement acts on the rows its guard still allows, so a row that moved meanwhile is
 * left alone and not reported.
 */
public final class AdminActionSql {

    private static final String TERMINAL = "('done', 'failed', 'cancelled')";

    /** A row a retry brought back: its id and queue (the queue to wake). */
    public record Retried(long id, String queue) {
    }

    private final Db db;

    /**
     * Makes the given runnable instances due now: those scheduled later (a run-at, a backoff) get
     * eligible_at now; those already due keep their place in the queue. Index: the primary key; moves
     * the rows' pick-index entries. Locks: the updated rows.
     */
    private final String runNow;

    /**
     * Sets the priority of the given live instances (an executing one keeps it for its next attempts).
     * updated_at is left alone: it is not a transition (an executing row's updated_at is when its
     * attempt began). Index: the primary key; moves runnable rows' pick-index entries. Locks: the
     * updated rows.
     */
    private final String priority;

    /** Pauses queue $1 (paused by $2). Index: the pauses' primary key. */
    private final String pause;
    /** Resumes queue $1. Index: the pauses' primary key. */
    private final String resume;
    /** The paused queues. Index: none (a few rows). */
    private final String paused;

    /**
     * Retry in place of the given failed or cancelled instances. From the history: each row goes back
     * into the hot table with its id, args/state, step, error and the gate and rate limit it ran under
     * (kept in the history), runnable at $2 (now when null), attempt 0 and a correlation key
     * occupied while live; a row whose key a live instance holds now is skipped
     * (ON CONFLICT DO NOTHING) and stays in the history. Rows still in the hot table (their key was kept
     * occupied after they settled) are updated in place. A child whose parent is live is left alone: its
     * parent has counted it off already. Index: both primary keys, the correlation unique index; writes
     * the pick index. Locks: the rows moved and updated.
     */
    private final String retry;

    /**
     * Deletes the given settled instances from either table, with their recorded attempts and step
     * inputs and their fork links (a hot row's signals go with it: trigger durable_signals_forgotten),
     * sparing children whose parent is live. Index: both primary keys; the attempts by instance; the
     * step inputs' and the forks' primary keys.
     * Locks: the deleted rows.
     */
    private final String delete;

    public AdminActionSql(Db db, Tables tables) {
        this.db = db;
        this.runNow = tables.render("""
                UPDATE {instances} i SET eligible_at = now(), updated_at = now()
                 WHERE i.id = ANY ($1::bigint[]) AND i.status = 'runnable' AND i.eligible_at > now()
                RETURNING i.id, i.queue""");
        this.priority = tables.render("""
                UPDATE {instances} i SET priority = $2
                 WHERE i.id = ANY ($1::bigint[]) AND i.status NOT IN """ + TERMINAL + """
                   AND i.priority <> $2
                RETURNING i.id, i.queue""");
        this.pause = tables.render("INSERT INTO {queue_pauses} (queue, paused_by) VALUES ($1, $2)"
                + " ON CONFLICT (queue) DO NOTHING RETURNING queue");
        this.resume = tables.render("DELETE FROM {queue_pauses} WHERE queue = $1 RETURNING queue");
        this.paused = tables.render("SELECT queue, paused_at, paused_by FROM {queue_pauses} ORDER BY queue");
        String parentLive = "EXISTS (SELECT 1 FROM {instances} p WHERE p.id = %s.parent_id AND p.status NOT IN "
                + TERMINAL + ")";
        this.retry = tables.render("""
                WITH cand AS (
                    SELECT h.* FROM {history} h
                     WHERE h.id = ANY ($1::bigint[]) AND h.status IN ('failed', 'cancelled') AND NOT %s
                ), back AS (
                    INSERT INTO {instances} AS i (id, type, type_version, queue, priority, status, step, state,
                                             last_error, attempt, max_attempts, eligible_at, parent_id,
                                             concurrency_key, correlation_key, correlation_statuses,
                                             gate_name, gate_shard, rate_limit, rate_weight, rate_partition,
                                             has_children, inserted_at, updated_at, trace_context, trace_last,
                                             fairness_key, window_name, window_weight, window_partition)
                    SELECT c.id, c.type, c.type_version, c.queue, c.priority, 'runnable', c.step, c.state,
                           c.last_error, 0, c.max_attempts, COALESCE($2::timestamptz, now()), c.parent_id,
                           c.concurrency_key, c.correlation_key,
                           CASE WHEN c.correlation_key IS NOT NULL THEN $3::text[] END,
                           c.gate_name, c.gate_shard, c.rate_limit, c.rate_weight, c.rate_partition,
                           EXISTS (SELECT 1 FROM {history} k WHERE k.parent_id = c.id)
                               OR EXISTS (SELECT 1 FROM {instances} k WHERE k.parent_id = c.id),
                           c.inserted_at, now(), c.trace_context, c.trace_last, c.fairness_key,
                           c.window_name, c.window_weight, c.window_partition
                      FROM cand c
                     ORDER BY c.id
                    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING
                    RETURNING i.id, i.queue
                ), gone AS (
                    DELETE FROM {history} h USING back b WHERE h.id = b.id
                ), kept AS (
                    UPDATE {instances} i
                       SET status = 'runnable', attempt = 0, eligible_at = COALESCE($2::timestamptz, now()),
                           result = NULL, cancel_requested = false, updated_at = now(),
                           -- a follow-up its settle could not insert (the key stayed occupied) was dropped
                           -- then: it must not come back when the retried row settles again
                           follow_up = NULL, debounce_until = NULL
                     WHERE i.id = ANY ($1::bigint[]) AND i.status IN ('failed', 'cancelled') AND NOT %s
                    RETURNING i.id, i.queue
                )
                SELECT id, queue FROM back UNION ALL SELECT id, queue FROM kept""".formatted(
                parentLive.formatted("h"), parentLive.formatted("i")));
        this.delete = tables.render("""
                WITH h AS (
                    DELETE FROM {history} h WHERE h.id = ANY ($1::bigint[]) AND NOT %s
                    RETURNING h.id
                ), k AS (
                    DELETE FROM {instances} i WHERE i.id = ANY ($1::bigint[]) AND i.status IN %s AND NOT %s
                    RETURNING i.id
                ), a AS (
                    DELETE FROM {attempts} a WHERE a.instance_id = ANY (ARRAY(SELECT id FROM h UNION ALL SELECT id FROM k))
                ), r AS (
                    DELETE FROM {step_inputs} r WHERE r.instance_id = ANY (ARRAY(SELECT id FROM h UNION ALL SELECT id FROM k))
                ), f AS (
                    DELETE FROM {forks} f WHERE f.id = ANY (ARRAY(SELECT id FROM h UNION ALL SELECT id FROM k))
                )
                SELECT id FROM h UNION ALL SELECT id FROM k""".formatted(parentLive.formatted("h"), TERMINAL,
                parentLive.formatted("i")));
    }


    /** Retries in place those of {@code ids} that may be ({@link #retry}); emits each one retried. */
    public Flux<Retried> retry(List<Long> ids, @Nullable Instant runAt, Set<InstanceStatus> occupied) {
        String[] statuses = occupied.stream().map(InstanceStatus::sqlName).sorted().toArray(String[]::new);
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(retry).bind(0, ids.toArray(Long[]::new));
            Db.bind(statement, 1, runAt, Instant.class);
            statement.bind(2, statuses);
            return Flux.from(statement.execute())
                    .concatMap(result -> result.map(row -> new Retried(row.get("id", Long.class),
                            row.get("queue", String.class))));
        }).onErrorMap(Errors::translate);
    }

    /** Makes those of {@code ids} that are runnable and scheduled later due now; emits each one moved. */
    public Flux<Retried> runNow(List<Long> ids) {
        return idsAndQueues(runNow, ids, null);
    }

    /** Sets the priority of those of {@code ids} that are live and have another; emits each one changed. */
    public Flux<Retried> setPriority(List<Long> ids, int value) {
        return idsAndQueues(priority, ids, value);
    }

    private Flux<Retried> idsAndQueues(String sql, List<Long> ids, @Nullable Integer value) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(sql).bind(0, ids.toArray(Long[]::new));
            if (value != null) {
                statement.bind(1, value);
            }
            return Flux.from(statement.execute()).concatMap(result -> result.map(row -> new Retried(
                    row.get("id", Long.class), row.get("queue", String.class))));
        }).onErrorMap(Errors::translate);
    }

    /** Pauses {@code queue}; true when it was not paused. */
    public Mono<Boolean> pause(String queue, String by) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(pause).bind(0, queue).bind(1, by)
                        .execute())
                .concatMap(result -> result.map(row -> true))).hasElements().onErrorMap(Errors::translate);
    }

    /** Resumes {@code queue}; true when it was paused. */
    public Mono<Boolean> resume(String queue) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(resume).bind(0, queue).execute())
                .concatMap(result -> result.map(row -> true))).hasElements().onErrorMap(Errors::translate);
    }

    public Flux<QueuePause> pausedQueues() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(paused).execute())
                .concatMap(result -> result.map(row -> new QueuePause(row.get("queue", String.class),
                        row.get("paused_at", Instant.class), row.get("paused_by", String.class)))));
    }

    /** Deletes those of {@code ids} that are settled and not awaited by a live parent; emits each deleted id. */
    public Flux<Long> delete(List<Long> ids) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(delete)
                        .bind(0, ids.toArray(Long[]::new)).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .onErrorMap(Errors::translate);
    }
}
