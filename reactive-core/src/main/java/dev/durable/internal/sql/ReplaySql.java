package dev.durable.internal.sql;

import dev.durable.admin.StepInput;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The statements of replay from a step and fork, and the reads of what they start from (tables
 * durable_step_inputs and durable_forks):
 * the recorded step inputs and the fork links. None is on a hot path.
 *
 * <p>The state a step starts with, when none is given: the instance's own row for the step it is at
 * (or settled at: a settling outcome keeps the state its step ran with), else the step's row in
 * {@code durable_step_inputs} (the state it last ran with, recorded by a trigger as the instance left
 * it). Without either the step has no recorded input and neither statement acts.
 */
public final class ReplaySql {

    private static final String TERMINAL = "('done', 'failed', 'cancelled')";

    /**
     * The state the step {@code $2} starts with for the source row {@code s}: the given one ($3), else
     * the row's own for its step, else the recorded one.
     */
    private static final String START_STATE = """
            CASE WHEN $3::text IS NOT NULL THEN $3::jsonb
                 WHEN s.step = $2 THEN s.state
                 ELSE (SELECT r.state FROM {step_inputs} r WHERE r.instance_id = s.id AND r.step = $2) END""";

    /**
     * The workflow version of that state: a given one's is $6 (the version of the definition that
     * checked it; the row's own when the engine does not know the type), else the row's own, or the
     * recorded input's (a step recorded before a claim-time migration keeps its old version, so the
     * claim that runs it migrates it again).
     */
    private static final String START_VERSION = """
            CASE WHEN $3::text IS NOT NULL THEN COALESCE($6::int, s.type_version)
                 WHEN s.step = $2 THEN s.type_version
                 ELSE (SELECT r.type_version FROM {step_inputs} r WHERE r.instance_id = s.id AND r.step = $2) END""";

    /**
     * The source may start at {@code $2}: a state is given and may be used for any step ($4 false: the
     * engine knows the step), or the step has a recorded input.
     */
    private static final String STARTS = """
            (($3::text IS NOT NULL AND NOT $4) OR s.step = $2
             OR EXISTS (SELECT 1 FROM {step_inputs} r WHERE r.instance_id = s.id AND r.step = $2))""";

    /** A row bringing an instance back, or a fork: its id and its queue (to poke). */
    public record Started(long id, String queue) {
    }

    /**
     * Brings the settled instance $1 back as runnable at step $2 with its state there (or $3), a fresh
     * attempt budget, no result and no error, keeping its id, args, links, limits and history; records
     * the attempt it settled with (when it ran) and a 'replayed' one ($5 says from where) in
     * {@code durable_attempts}. The instance is in the history, or, when its correlation key stays
     * occupied once settled, in the hot table: {@code hist} and {@code hot} lock it first, so of two
     * replays racing the second finds it gone from the history (or live again in the hot table) and acts
     * on nothing. Refused (no row) for a child whose parent still waits for it (it was counted off
     * already), a parent some of whose children still run (they would count themselves off its new
     * spawn), a step with no input ({@link #STARTS}), or, through ON CONFLICT, a key a live instance
     * now holds. Given a state, the row takes version $6. Index: both primary keys, the step inputs'
     * primary key, the parent index, the attempts'. Locks: the instance's row.
     */
    private final String replay;

    /**
     * Inserts a new runnable instance of the source $1's type, version and queue at step $2 with the
     * state there (or $3), with the source's priority, attempt budget, concurrency key and limits, but
     * neither its correlation key (the source holds it, or held it) nor its parent (the fork is nobody's
     * child); links it to the source in {@code durable_forks} and records a 'forked' attempt ($5). It
     * stays in the source's trace: its first run is a child of the source's trace context and links to
     * the source's last run. The
     * source may be live or settled. Index: both primary keys (the view's two parts), the step inputs'.
     * Locks: none but the new rows.
     */
    private final String fork;

    /**
     * The recorded inputs of an instance's steps, oldest first. Index: the step inputs' primary key.
     * Locks: none.
     */
    private final String inputs;

    /** Whether step $2 of instance $1 has a recorded input. Index: the step inputs' primary key. */
    private final String recorded;

    /** Whether instance $1 has a child that has not settled. Index: the parent index. Locks: none. */
    private final String childrenLive;

    /**
     * What instance $1 was forked from (one row, kind 'from') and its forks (kind 'fork'), at most $2.
     * Index: the forks' primary key and durable_forks_from_idx. Locks: none.
     */
    private final String lineage;

    private final Db db;

    public ReplaySql(Db db, Tables tables) {
        this.db = db;
        // A parent whose children still run: its replay would count them off its new spawn's children.
        String childrenLive = "EXISTS (SELECT 1 FROM {instances} c WHERE c.parent_id = s.id AND c.status NOT IN "
                + TERMINAL + ")";
        String parentLive = "EXISTS (SELECT 1 FROM {instances} p WHERE p.id = s.parent_id AND p.status NOT IN "
                + TERMINAL + ")";
        this.replay = tables.render("""
                WITH hist AS (
                    SELECT h.* FROM {history} h WHERE h.id = $1 FOR UPDATE
                ), hot AS (
                    SELECT i.id, i.status, i.step, i.state, i.type_version, i.last_error, i.attempt, i.updated_at,
                           i.parent_id
                      FROM {instances} i WHERE i.id = $1 AND i.status IN %s FOR UPDATE
                ), src AS (
                    SELECT id, status, step, state, type_version, last_error, attempt, settled_at, parent_id,
                           true AS archived
                      FROM hist
                     UNION ALL
                    SELECT id, status, step, state, type_version, last_error, attempt, updated_at, parent_id, false
                      FROM hot
                ), ok AS (
                    SELECT s.*, %s AS start_state, %s AS start_version FROM src s WHERE NOT %s AND NOT %s AND %s
                ), back AS (
                    INSERT INTO {instances} AS i (id, type, type_version, queue, priority, status, step, state,
                                             attempt, max_attempts, eligible_at, parent_id, concurrency_key,
                                             correlation_key, correlation_statuses, gate_name, gate_shard,
                                             rate_limit, rate_weight, rate_partition, has_children, inserted_at,
                                             updated_at, trace_context, trace_last, fairness_key,
                                             window_name, window_weight, window_partition)
                    SELECT h.id, h.type, o.start_version, h.queue, h.priority, 'runnable', $2, o.start_state, 0,
                           h.max_attempts, now(), h.parent_id, h.concurrency_key, h.correlation_key,
                           CASE WHEN h.correlation_key IS NOT NULL THEN $7::text[] END,
                           h.gate_name, h.gate_shard, h.rate_limit, h.rate_weight, h.rate_partition,
                           EXISTS (SELECT 1 FROM {history} k WHERE k.parent_id = h.id)
                               OR EXISTS (SELECT 1 FROM {instances} k WHERE k.parent_id = h.id),
                           h.inserted_at, now(), h.trace_context, h.trace_last,
                           h.fairness_key, h.window_name, h.window_weight, h.window_partition
                      FROM ok o JOIN hist h ON h.id = o.id
                    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING
                    RETURNING i.id, i.queue
                ), gone AS (
                    DELETE FROM {history} h USING back b WHERE h.id = b.id
                ), kept AS (
                    UPDATE {instances} i
                       SET status = 'runnable', step = $2, state = o.start_state, type_version = o.start_version,
                           attempt = 0, eligible_at = now(),
                           result = NULL, last_error = NULL, cancel_requested = false, awaited_signals = NULL,
                           await_deadline = NULL, children_pending = 0, updated_at = now(),
                           -- a follow-up dropped when it settled must not come back when it settles again
                           follow_up = NULL, debounce_until = NULL
                      FROM ok o
                     WHERE i.id = o.id AND NOT o.archived
                    RETURNING i.id, i.queue
                ), started AS (
                    SELECT id, queue FROM back UNION ALL SELECT id, queue FROM kept
                ), noted AS (
                    INSERT INTO {attempts} (instance_id, attempt, step, started_at, finished_at, outcome, error)
                    SELECT o.id, o.attempt, o.step, NULL::timestamptz, o.settled_at, o.status, o.last_error
                      FROM ok o JOIN started d ON d.id = o.id WHERE o.attempt > 0
                     UNION ALL
                    SELECT o.id, 0, $2, NULL::timestamptz, now(), 'replayed', $5 FROM ok o JOIN started d ON d.id = o.id
                )
                SELECT id, queue FROM started""".formatted(TERMINAL, START_STATE, START_VERSION, parentLive, childrenLive,
                STARTS));
        this.fork = tables.render("""
                WITH s AS (
                    SELECT * FROM {instances_all} WHERE id = $1
                ), ok AS (
                    SELECT s.*, %s AS start_state, %s AS start_version FROM s WHERE %s
                ), made AS (
                    INSERT INTO {instances} AS i (type, type_version, queue, priority, status, step, state,
                                             max_attempts, concurrency_key, gate_name, gate_shard, rate_limit,
                                             rate_weight, rate_partition, window_name, window_weight,
                                             window_partition, trace_context, trace_last, fairness_key)
                    SELECT o.type, o.start_version, o.queue, o.priority, 'runnable', $2, o.start_state,
                           o.max_attempts, o.concurrency_key, o.gate_name, o.gate_shard, o.rate_limit,
                           o.rate_weight, o.rate_partition, o.window_name, o.window_weight, o.window_partition,
                           o.trace_context, o.trace_last,
                           -- the source's tenant (the view has no fairness key: read from its table)
                           (SELECT k.fairness_key FROM {instances} k WHERE k.id = $1
                             UNION ALL
                            SELECT k.fairness_key FROM {history} k WHERE k.id = $1 LIMIT 1)
                      FROM ok o
                    RETURNING i.id, i.queue
                ), linked AS (
                    INSERT INTO {forks} (id, forked_from, step) SELECT m.id, $1, $2 FROM made m
                ), noted AS (
                    INSERT INTO {attempts} (instance_id, attempt, step, outcome, error)
                    SELECT m.id, 0, $2, 'forked', $5 FROM made m
                )
                SELECT id, queue FROM made""".formatted(START_STATE, START_VERSION, STARTS));
        this.inputs = tables.render("SELECT step, type_version, state::text AS state, started_at, recorded_at"
                + " FROM {step_inputs} WHERE instance_id = $1 ORDER BY recorded_at, step");
        this.recorded = tables.render("SELECT 1 FROM {step_inputs} WHERE instance_id = $1 AND step = $2");
        this.childrenLive = tables.render("SELECT 1 FROM {instances} WHERE parent_id = $1 AND status NOT IN "
                + TERMINAL + " LIMIT 1");
        this.lineage = tables.render("""
                (SELECT 'from' AS kind, forked_from AS other FROM {forks} WHERE id = $1)
                 UNION ALL
                (SELECT 'fork', id FROM {forks} WHERE forked_from = $1 ORDER BY id LIMIT $2)""");
    }

    /**
     * {@link #replay}: emits the instance brought back, or nothing when it was refused. {@code state} is
     * JSON or null for the recorded one; {@code recordedOnly} refuses a given state for a step the
     * instance never ran (the engine cannot tell whether the workflow has that step).
     */
    public Mono<Started> replay(long id, String step, @Nullable String state, @Nullable Integer stateVersion,
            boolean recordedOnly, String note, Set<String> occupied) {
        return run(replay, id, step, state, stateVersion, recordedOnly, note,
                occupied.stream().sorted().toArray(String[]::new));
    }

    /** {@link #fork}: emits the new instance, or nothing when there is no such instance or no input. */
    public Mono<Started> fork(long id, String step, @Nullable String state, @Nullable Integer stateVersion,
            boolean recordedOnly, String note) {
        return run(fork, id, step, state, stateVersion, recordedOnly, note, null);
    }

    private Mono<Started> run(String sql, long id, String step, @Nullable String state, @Nullable Integer stateVersion,
            boolean recordedOnly, String note, String @Nullable [] occupied) {
        return db.withConnection(connection -> {
                    Statement statement = connection.createStatement(sql).bind(0, id).bind(1, step);
                    Db.bind(statement, 2, state, String.class);
                    statement.bind(3, recordedOnly).bind(4, note);
                    Db.bind(statement, 5, stateVersion, Integer.class);
                    if (occupied != null) {
                        statement.bind(6, occupied);
                    }
                    return Flux.from(statement.execute())
                            .concatMap(result -> result.map(row -> new Started(row.get("id", Long.class),
                                    row.get("queue", String.class))));
                })
                .next()
                .onErrorMap(Errors::translate);
    }

    /** The recorded inputs of instance {@code id}'s steps, oldest first (not the step its own row is at). */
    public Flux<StepInput> inputs(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(inputs).bind(0, id).execute())
                        .concatMap(result -> result.map(ReplaySql::input)))
                .onErrorMap(Errors::translate);
    }

    /** Whether step {@code step} of instance {@code id} has a recorded input. */
    public Mono<Boolean> recorded(long id, String step) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(recorded).bind(0, id)
                        .bind(1, step).execute())
                        .concatMap(result -> result.map(row -> true)))
                .hasElements()
                .onErrorMap(Errors::translate);
    }

    /** Whether instance {@code id} has a child still running. */
    public Mono<Boolean> childrenLive(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(childrenLive).bind(0, id)
                        .execute())
                        .concatMap(result -> result.map(row -> true)))
                .hasElements()
                .onErrorMap(Errors::translate);
    }

    /** What {@code id} was forked from, and up to {@code limit} of its forks. */
    public record Lineage(@Nullable Long forkedFrom, java.util.List<Long> forks) {
    }

    public Mono<Lineage> lineage(long id, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(lineage).bind(0, id)
                        .bind(1, limit).execute())
                        .concatMap(result -> result.map(row -> new Object[] {row.get("kind", String.class),
                                row.get("other", Long.class)})))
                .collectList()
                .map(rows -> {
                    Long from = null;
                    java.util.List<Long> forks = new java.util.ArrayList<>();
                    for (Object[] row : rows) {
                        if ("from".equals(row[0])) {
                            from = (Long) row[1];
                        } else {
                            forks.add((Long) row[1]);
                        }
                    }
                    return new Lineage(from, forks);
                })
                .onErrorMap(Errors::translate);
    }

    private static StepInput input(Readable row) {
        return new StepInput(row.get("step", String.class), row.get("type_version", Integer.class),
                row.get("state", String.class), row.get("started_at", Instant.class),
                row.get("recorded_at", Instant.class), false);
    }
}
