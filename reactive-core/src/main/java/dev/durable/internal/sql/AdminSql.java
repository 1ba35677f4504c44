package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.Limits;
import dev.durable.admin.Attempt;
import dev.durable.admin.InboxSignal;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.GateUsage;
import dev.durable.admin.QueuePause;
import dev.durable.admin.RateBucket;
import dev.durable.admin.SearchIndex;
import java.time.Duration;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The admin API's statements: listing and search, counts, detail, retry in place and delete. None is
 * on a hot path; the listing's text depends on which filters are given (each combination is one
 * statement text, so the planner sees the conditions it must serve and their literal statuses).
 *
 * <p>What each filter rides (the hot table holds only live rows and is walked by its primary key in id
 * order, filtering as it goes; the indexes named are the history's, in the schema's "Indexes"):
 * <ul>
 * <li>no filter, or status done only: the primary key, backwards for newest first, stopping at the page;
 * <li>queue: {@code durable_history_queue_idx (queue, id)} when it was created ({@code SearchIndex.QUEUE},
 *     opt-in), else a filter on the id walk; with status failed or cancelled,
 *     {@code durable_history_unsuccessful_idx (queue, status, id)};
 * <li>type: {@code durable_history_type_idx (type, id)} when it was created ({@code SearchIndex.TYPE},
 *     opt-in), else a filter on the walk the other conditions chose;
 * <li>correlation key, exact or prefix: {@code durable_history_correlation_idx} (text_pattern_ops, a range);
 * <li>args/state containment: {@code durable_history_state_idx} (GIN jsonb_path_ops, {@code SearchIndex.ARGS},
 *     opt-in) when it exists and the match is rare, else the id walk (or the other conditions' index)
 *     with the containment as a filter;
 * <li>inserted range: {@code durable_history_inserted_brin}; updated (settled) range:
 *     {@code durable_history_settled_brin}, fetched and sorted when the planner reckons the range's rows
 *     at most {@link #SORT_AT_MOST} (see {@link #sortHistory}), else the id walk with the range as a filter;
 *     eligible range and error text: filters on whichever walk the other conditions chose (errors are on
 *     failed rows: filter by status failed to ride the unsuccessful index).
 * </ul>
 * Several conditions: the planner picks the most selective index and filters the rest. Pages are keyed
 * on id ({@code id < $k} newest first, {@code id > $k} oldest first), so a deep page costs what the
 * first does. Locks: none but the actions' (retry and delete lock the rows they move or delete).
 */
public final class AdminSql {

    private static final String TERMINAL = "('done', 'failed', 'cancelled')";

    /**
     * A history row read as the columns of an instance ({@code InstanceSql.INSTANCE_COLUMNS}): the
     * history's own part of the listing, so each part keeps its own indexes and keyset order (the view
     * durable_instances_all would do for one table's plan, not for the per-part sort it needs).
     */
    private static final String HISTORY_AS_INSTANCE = """
            id, type, type_version, queue, priority, status, step, state::text AS state,
            result::text AS result, last_error, attempt, max_attempts, eligible_at,
            NULL::text[] AS awaited_signals, NULL::timestamptz AS await_deadline, parent_id,
            0 AS children_pending, concurrency_key, correlation_key, NULL::text AS claimed_by,
            NULL::timestamptz AS lease_expires_at, false AS cancel_requested, inserted_at,
            settled_at AS updated_at""";

    /** A row a retry brought back: its id and queue (the queue to wake). */
    public record Retried(long id, String queue) {
    }

    /** One (queue, status) count from the hot table, the history, or the history's statistics. */
    public record Count(String queue, InstanceStatus status, long count) {
    }

    /**
     * The driver keeps statements prepared, and after five runs PostgreSQL may plan one generically,
     * blind to the arguments: a containment or prefix search then walks the whole history by id
     * instead of its index (1.2 s instead of 2 ms over a million rows). The listing and the bulk
     * reads plan each run with its arguments (a millisecond of planning), in a transaction of their
     * own so the setting ends with it.
     */
    private static final String CUSTOM_PLAN = "SET LOCAL plan_cache_mode = force_custom_plan";

    private final Db db;
    private final Tables tables;
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

    /** Children of an instance, live then settled, in id order. Index: both parent indexes. Locks: none. */
    private final String children;

    /** A live instance's signals, consumed or not, in delivery order. Index: durable_signals_dedup_uq's instance_id. */
    private final String inbox;

    /** The names of the signals a settled instance consumed. Index: the history's primary key. */
    private final String consumed;

    /** One instance by id, live or settled. Index: both primary keys (through the view). */
    private final String select;

    /** The newest recorded attempts of an instance, oldest first. Index: durable_attempts_instance_idx. */
    private final String attempts;

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

    /** The highest id in either table: a bulk action's upper bound. Index: both primary keys (their last entry). */
    private final String maxId;

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
     * Deletes the given settled instances from either table, with the signals of hot rows (history rows
     * have none), their recorded attempts and step inputs and their fork links, sparing children whose
     * parent is live. Index: both primary keys; the signals and the attempts by instance; the step inputs'
     * and the forks' primary keys.
     * Locks: the deleted rows.
     */
    private final String delete;

    /**
     * Live gate claims per (gate, key), busiest first, with the capacity of the gates configured here
     * ($1 names, $2 capacities; $3 the most keys). Counted from the rows, not the limiter's counters, so
     * it answers for every limiter, and a lapsed lease (a dead worker's row the reaper has not reached)
     * holds nothing; plus the slots of live permits the PostgreSQL limiter granted outside jobs
     * (durable_limit_permits, a few rows). Index: durable_instances_executing_idx, the partial index of executing rows (a full
     * walk of it: the executing rows are bounded by the engines' concurrency), then a top-N sort of the
     * groups. Locks: none.
     */
    private final String gateUsage;

    /**
     * The PostgreSQL limiter's token buckets with their tokens refilled to now as the pick refills them
     * ({@link AdmissionSql#REFILLED}) for the limits configured here ($1 names, $2 rates, $3 bursts; a bucket
     * of another limit shows its stored tokens), emptiest first; $4 the most rows. Index: a scan of
     * durable_rate_buckets (kept small: the bucket sweeper deletes buckets full again) and a top-N sort.
     * Locks: none (a pick updating a bucket meanwhile is not waited for: the stored row is read).
     */
    private final String buckets;

    /**
     * The PostgreSQL limiter's sliding windows, per partition what their live slots counted (each row's
     * own slot length), with the limits configured here ($1 names, $2 limits), fullest first; $3 the most
     * rows. Index: a scan of durable_window_counters (the bucket sweeper deletes idle ones) and a top-N
     * sort. Locks: none.
     */
    private final String windows;

    /** The opt-in search indexes: name and definition over the history (see SearchIndex). */
    private static final Map<SearchIndex, String[]> SEARCH_INDEXES = new EnumMap<>(Map.of(
            SearchIndex.TYPE, new String[] {"durable_history_type_idx", "(type, id)"},
            SearchIndex.ARGS, new String[] {"durable_history_state_idx", "USING gin (state jsonb_path_ops)"},
            SearchIndex.QUEUE, new String[] {"durable_history_queue_idx", "(queue, id)"}));

    /** Which of the named indexes exist in the schema, and whether each is valid. Reads pg_index. */
    private static final String INDEXES = """
            SELECT c.relname, x.indisvalid FROM pg_index x
              JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = ANY ($2::text[])""";

    public AdminSql(Db db, Tables tables, String schema) {
        this.db = db;
        this.tables = tables;
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
        this.children = tables.render("SELECT * FROM ((SELECT " + InstanceSql.INSTANCE_COLUMNS
                + " FROM {instances} WHERE parent_id = $1 ORDER BY id LIMIT $2)\n UNION ALL\n(SELECT "
                + HISTORY_AS_INSTANCE + " FROM {history} WHERE parent_id = $1 ORDER BY id LIMIT $2)) c"
                + " ORDER BY id LIMIT $2");
        this.inbox = tables.render("SELECT id, name, payload::text AS payload, dedup_key, inserted_at, consumed_at"
                + " FROM {signals} WHERE instance_id = $1 ORDER BY id LIMIT $2");
        this.select = tables.render("SELECT " + InstanceSql.INSTANCE_COLUMNS + " FROM {instances_all} WHERE id = $1");
        this.attempts = tables.render("""
                SELECT * FROM (SELECT attempt, step, worker, started_at, finished_at, outcome, error
                                 FROM {attempts} WHERE instance_id = $1
                                ORDER BY finished_at DESC LIMIT $2) a
                 ORDER BY finished_at""");
        this.consumed = tables.render("SELECT signals FROM {history} WHERE id = $1");
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
        this.maxId = tables.render("SELECT greatest((SELECT max(id) FROM {instances}), (SELECT max(id) FROM {history}),"
                + " 0)");
        this.gateUsage = tables.render("""
                SELECT u.gate_name, u.concurrency_key, u.held, g.capacity
                  FROM (SELECT gate_name, concurrency_key, sum(slots)::bigint AS held
                          FROM (SELECT gate_name, concurrency_key, 1 AS slots
                                  FROM {instances}
                                 WHERE status = 'executing' AND gate_name IS NOT NULL AND lease_expires_at > now()
                                UNION ALL
                                SELECT gate, key, slots FROM {permits} WHERE expires_at > now()) claims
                         GROUP BY gate_name, concurrency_key) u
                  LEFT JOIN unnest($1::text[], $2::int[]) AS g(name, capacity) ON g.name = u.gate_name
                 ORDER BY u.held DESC, u.gate_name, u.concurrency_key
                 LIMIT $3""");
        this.buckets = tables.render("""
                SELECT * FROM (
                    SELECT b.name, b.partition_key, b.refilled_at, r.burst,
                           CASE WHEN r.name IS NULL THEN b.tokens ELSE {refilled} END AS tokens
                      FROM {buckets} b
                      LEFT JOIN unnest($1::text[], $2::float8[], $3::int[]) AS r(name, rate, burst) ON r.name = b.name
                ) t
                 ORDER BY t.burst IS NULL, t.tokens / t.burst, t.name, t.partition_key
                 LIMIT $4""").replace("{refilled}", AdmissionSql.REFILLED.formatted("r.burst", "r.rate"));
        this.windows = tables.render("""
                SELECT * FROM (
                    SELECT w.name, w.partition_key, x.lim,
                           (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                             WHERE u.s > floor(extract(epoch FROM now()) * 1000 / w.slot_millis)::bigint - {ring})::int
                               AS used
                      FROM {windows} w
                      LEFT JOIN unnest($1::text[], $2::int[]) AS x(name, lim) ON x.name = w.name
                ) t
                 ORDER BY t.used DESC, t.name, t.partition_key
                 LIMIT $3""").replace("{ring}", Integer.toString(Limits.Window.SLOTS + 1));
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
                    RETURNING i.id, i.has_signals
                ), s AS (
                    DELETE FROM {signals} s USING k WHERE s.instance_id = k.id AND k.has_signals
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

    /**
     * A page of the instances the filter matches: after {@code startAfter} in the order (exclusive), at
     * most {@code limit}. One statement: the hot table's page and the history's page, each walked in id
     * order and cut at the limit, merged. Both read one snapshot, so an instance that settles meanwhile is
     * in exactly one of them. A time range first asks the planner how many history rows it holds
     * ({@link #sortHistory}).
     */
    public Flux<Instance> page(InstanceFilter filter, boolean newestFirst, long startAfter, int limit) {
        return db.inTransaction(connection -> Db.execute(connection, CUSTOM_PLAN)
                        .then(sortHistory(connection, filter, newestFirst, startAfter))
                        .flatMapMany(sorted -> {
                            Where where = new Where(filter);
                            String sql = pageText(where, filter, newestFirst, startAfter, limit, sorted);
                            return Flux.from(where.bind(connection.createStatement(sql)).execute());
                        })
                        .concatMap(result -> result.map(InstanceSql::toInstance)))
                .onErrorMap(Errors::translate);
    }

    /** EXPLAIN (ANALYZE, BUFFERS) of {@link #page}'s statement with its arguments: which index each part rode. */
    public Flux<String> explainPage(InstanceFilter filter, boolean newestFirst, long startAfter, int limit) {
        return db.inTransaction(connection -> Db.execute(connection, CUSTOM_PLAN)
                .then(sortHistory(connection, filter, newestFirst, startAfter))
                .flatMapMany(sorted -> {
                    Where where = new Where(filter);
                    String sql = "EXPLAIN (ANALYZE, BUFFERS) "
                            + pageText(where, filter, newestFirst, startAfter, limit, sorted);
                    return Flux.from(where.bind(connection.createStatement(sql)).execute());
                })
                .concatMap(result -> result.map(row -> row.get(0, String.class))));
    }

    /**
     * Whether the history's part of a page reads the filter's rows through their indexes and sorts them,
     * rather than walking the history in id order until the page is full. Rows in a time range sit
     * together in id order, but the planner takes the range and the ids as independent: it walks by id
     * and, when the range lies far from where the walk starts, filters millions of rows first (1.5 s
     * over 10M rows for one day's rows two thirds down). So with a time range bounded on the side the
     * walk starts from, it is asked for its estimate of the matching rows (EXPLAIN, a planning and no execution): up to
     * {@link #SORT_AT_MOST} they are fetched by index (the BRIN index of the range, or a narrower one)
     * and sorted; more, and the walk finds a page soon enough.
     */
    private Mono<Boolean> sortHistory(io.r2dbc.spi.Connection connection, InstanceFilter filter, boolean newestFirst,
            long startAfter) {
        // Only a bound on the side the walk starts from keeps it away from matches: newest first, an end;
        // oldest first, a start. A range open on that side has its rows where the walk begins.
        boolean walkStartsOutside = newestFirst ? filter.insertedTo() != null || filter.updatedTo() != null
                : filter.insertedFrom() != null || filter.updatedFrom() != null;
        if (!walkStartsOutside || filter.liveOnly()) {
            return Mono.just(false);
        }
        Where where = new Where(filter);
        String sql = tables.render("EXPLAIN (FORMAT JSON) SELECT 1 FROM {history} WHERE " + where.render(true)
                + "id " + (newestFirst ? "<" : ">") + " $" + where.arg(startAfter));
        return Flux.from(where.bind(connection.createStatement(sql)).execute())
                .concatMap(result -> result.map(row -> row.get(0, String.class)))
                .collect(java.util.stream.Collectors.joining())
                .map(plan -> {
                    java.util.regex.Matcher rows = PLAN_ROWS.matcher(plan);
                    return rows.find() && Double.parseDouble(rows.group(1)) <= SORT_AT_MOST;
                });
    }

    /** The most history rows of a time range a page fetches by index and sorts (see {@link #sortHistory}). */
    static final long SORT_AT_MOST = 50_000;
    private static final java.util.regex.Pattern PLAN_ROWS = java.util.regex.Pattern.compile(
            "\"Plan Rows\":\\s*([0-9.eE+]+)");

    private String pageText(Where where, InstanceFilter filter, boolean newestFirst, long startAfter, int limit,
            boolean sortHistory) {
        int key = where.arg(startAfter);
        int size = where.arg(limit);
        String order = newestFirst ? "DESC" : "ASC";
        String keyset = "id " + (newestFirst ? "<" : ">") + " $" + key;
        List<String> parts = new ArrayList<>();
        parts.add("(SELECT " + InstanceSql.INSTANCE_COLUMNS + " FROM {instances} WHERE " + where.render(false)
                + keyset + " ORDER BY id " + order + " LIMIT $" + size + ")");
        if (!filter.liveOnly()) {
            // id + 0 has no index order: the planner fetches by the filter's indexes and sorts.
            parts.add("(SELECT " + HISTORY_AS_INSTANCE + " FROM {history} WHERE " + where.render(true) + keyset
                    + " ORDER BY " + (sortHistory ? "id + 0 " : "id ") + order + " LIMIT $" + size + ")");
        }
        return tables.render("SELECT * FROM (" + String.join("\n UNION ALL\n", parts) + ") page ORDER BY id "
                + order + " LIMIT $" + size);
    }

    /**
     * The ids the filter matches in ({@code afterId}, {@code upTo}], ascending, at most {@code limit}:
     * one batch of a bulk action. Index: as {@link #page}.
     */
    public Flux<Long> ids(InstanceFilter filter, long afterId, long upTo, int limit) {
        Where where = new Where(filter);
        String sql = idsText(where, filter, afterId, upTo, limit);
        return db.inTransaction(connection -> Db.execute(connection, CUSTOM_PLAN)
                        .thenMany(Flux.from(where.bind(connection.createStatement(sql)).execute()))
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .onErrorMap(Errors::translate);
    }

    /** How many ids {@link #ids} would return, and the last of them (null for none): a bulk job's count step. */
    public record Chunk(long count, @Nullable Long lastId) {
    }

    /** {@link #ids} counted on the server: the ids stay there. Index: as {@link #ids}. */
    public Mono<Chunk> countIds(InstanceFilter filter, long afterId, long upTo, int limit) {
        Where where = new Where(filter);
        String sql = "SELECT count(*) AS n, max(id) AS last FROM (" + idsText(where, filter, afterId, upTo, limit)
                + ") chunk";
        return db.inTransaction(connection -> Db.execute(connection, CUSTOM_PLAN)
                        .thenMany(Flux.from(where.bind(connection.createStatement(sql)).execute()))
                        .concatMap(result -> result.map(row -> new Chunk(row.get("n", Long.class),
                                row.get("last", Long.class)))))
                .single()
                .onErrorMap(Errors::translate);
    }

    private String idsText(Where where, InstanceFilter filter, long afterId, long upTo, int limit) {
        String range = "id > $" + where.arg(afterId) + " AND id <= $" + where.arg(upTo);
        int size = where.arg(limit);
        List<String> parts = new ArrayList<>();
        parts.add("(SELECT id FROM {instances} WHERE " + where.render(false) + range + " ORDER BY id LIMIT $" + size
                + ")");
        if (!filter.liveOnly()) {
            parts.add("(SELECT id FROM {history} WHERE " + where.render(true) + range + " ORDER BY id LIMIT $" + size
                    + ")");
        }
        return tables.render("SELECT id FROM (" + String.join("\n UNION ALL\n", parts) + ") batch ORDER BY id"
                + " LIMIT $" + size);
    }

    public Mono<Long> maxId() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(maxId).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))).single();
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

    /** What {@link #detail} read of one instance, all from one snapshot. */
    public record DetailRows(Instance instance, List<Instance> children, List<InboxSignal> inbox,
            List<String> consumedSignals, List<Attempt> attempts) {
    }

    /**
     * The instance {@code id} with up to {@code children} children, {@code signals} inbox signals, the
     * names it consumed once settled and its newest {@code attempts} recorded attempts, read on one
     * connection in one REPEATABLE READ, READ ONLY transaction: every part sees the same moment (a parent
     * and its children never disagree about a child that settles between two reads). Empty when no
     * instance has that id.
     */
    public Mono<DetailRows> detail(long id, int children, int signals, int attempts) {
        return db.inTransaction(connection -> Db.execute(connection,
                                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                        .then(rows(connection, select, id, null, InstanceSql::toInstance).next())
                        // One statement after the other: they share the connection.
                        .flatMap(instance -> rows(connection, this.children, id, children, InstanceSql::toInstance)
                                .collectList()
                                .flatMap(kids -> rows(connection, inbox, id, signals, AdminSql::inboxSignal)
                                        .collectList()
                                        .flatMap(box -> rows(connection, consumed, id, null, AdminSql::consumedNames)
                                                .next().defaultIfEmpty(List.of())
                                                .flatMap(names -> rows(connection, this.attempts, id, attempts,
                                                        AdminSql::attempt).collectList()
                                                        .map(tries -> new DetailRows(instance, kids, box, names,
                                                                tries))))))
                        .flux())
                .next()
                .onErrorMap(Errors::translate);
    }

    /** One statement's rows, its first argument the id and its second (when given) a limit. */
    private static <T> Flux<T> rows(io.r2dbc.spi.Connection connection, String sql, long id, @Nullable Integer limit,
            java.util.function.Function<Readable, T> mapper) {
        Statement statement = connection.createStatement(sql).bind(0, id);
        if (limit != null) {
            statement.bind(1, limit);
        }
        return Flux.from(statement.execute()).concatMap(result -> result.map(mapper::apply));
    }

    private static InboxSignal inboxSignal(Readable row) {
        return new InboxSignal(row.get("id", Long.class), row.get("name", String.class),
                row.get("payload", String.class), row.get("dedup_key", String.class),
                row.get("inserted_at", Instant.class), row.get("consumed_at", Instant.class));
    }

    private static Attempt attempt(Readable row) {
        return new Attempt(row.get("attempt", Integer.class), row.get("step", String.class),
                row.get("worker", String.class), row.get("started_at", Instant.class),
                row.get("finished_at", Instant.class), recordedOutcome(row.get("outcome", String.class)),
                row.get("error", String.class));
    }

    /** durable_attempts.outcome: 'retried', 'lease_lost', a replay's 'done'/'failed'/'cancelled', 'replayed', 'forked'. */
    private static Attempt.Outcome recordedOutcome(@Nullable String outcome) {
        return switch (String.valueOf(outcome)) {
            case "lease_lost" -> Attempt.Outcome.LEASE_LOST;
            case "done" -> Attempt.Outcome.DONE;
            case "failed" -> Attempt.Outcome.FAILED;
            case "cancelled" -> Attempt.Outcome.CANCELLED;
            case "replayed" -> Attempt.Outcome.REPLAYED;
            case "forked" -> Attempt.Outcome.FORKED;
            default -> Attempt.Outcome.RETRIED;
        };
    }

    private static List<String> consumedNames(Readable row) {
        String[] names = row.get(0, String[].class);
        return names == null ? List.of() : Arrays.asList(names);
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

    /** {@link #gateUsage}: at most {@code limit} keys, with the capacities of {@code gates}. */
    public Flux<GateUsage> gateUsage(Collection<Limits.Gate> gates, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(gateUsage)
                        .bind(0, gates.stream().map(Limits.Gate::name).toArray(String[]::new))
                        .bind(1, gates.stream().map(Limits.Gate::capacity).toArray(Integer[]::new))
                        .bind(2, limit)
                        .execute())
                .concatMap(result -> result.map(row -> {
                    String key = row.get("concurrency_key", String.class);
                    return new GateUsage(row.get("gate_name", String.class), key == null ? "" : key,
                            row.get("held", Long.class), row.get("capacity", Integer.class));
                })))
                .onErrorMap(Errors::translate);
    }

    /** {@link #buckets}: at most {@code limit}, refilled by the rates of {@code rates}. */
    public Flux<RateBucket> buckets(Collection<Limits.RateLimit> rates, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(buckets)
                        .bind(0, rates.stream().map(Limits.RateLimit::name).toArray(String[]::new))
                        .bind(1, rates.stream().map(Limits.RateLimit::ratePerSecond).toArray(Double[]::new))
                        .bind(2, rates.stream().map(Limits.RateLimit::burst).toArray(Integer[]::new))
                        .bind(3, limit)
                        .execute())
                .concatMap(result -> result.map(row -> new RateBucket(row.get("name", String.class),
                        row.get("partition_key", String.class), row.get("tokens", Double.class),
                        row.get("burst", Integer.class), row.get("refilled_at", Instant.class)))))
                .onErrorMap(Errors::translate);
    }

    /** {@link #windows}: at most {@code limit} partitions, with the limits of {@code windows}. */
    public Flux<dev.durable.admin.WindowUsage> windows(Collection<Limits.Window> windows, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(this.windows)
                        .bind(0, windows.stream().map(Limits.Window::name).toArray(String[]::new))
                        .bind(1, windows.stream().map(Limits.Window::limit).toArray(Integer[]::new))
                        .bind(2, limit)
                        .execute())
                .concatMap(result -> result.map(row -> new dev.durable.admin.WindowUsage(row.get("name", String.class),
                        row.get("partition_key", String.class), row.get("used", Integer.class),
                        row.get("lim", Integer.class)))))
                .onErrorMap(Errors::translate);
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

    /** The opt-in search indexes that exist and are valid. */
    public Mono<Set<SearchIndex>> searchIndexes() {
        return indexStates().map(states -> {
            Set<SearchIndex> valid = EnumSet.noneOf(SearchIndex.class);
            states.forEach((index, ok) -> {
                if (ok) {
                    valid.add(index);
                }
            });
            return valid;
        });
    }

    /** Each search index that exists, and whether it is valid (false: a concurrent build failed midway). */
    private Mono<Map<SearchIndex, Boolean>> indexStates() {
        String[] names = SEARCH_INDEXES.values().stream().map(def -> def[0]).toArray(String[]::new);
        return db.withConnection(connection -> Flux.from(connection.createStatement(INDEXES).bind(0, schema)
                                .bind(1, names).execute())
                        .concatMap(result -> result.map(row -> Map.entry(row.get(0, String.class),
                                Boolean.TRUE.equals(row.get(1, Boolean.class))))))
                .collectList()
                .map(rows -> {
                    Map<SearchIndex, Boolean> states = new EnumMap<>(SearchIndex.class);
                    SEARCH_INDEXES.forEach((index, def) -> rows.stream().filter(r -> r.getKey().equals(def[0]))
                            .findFirst().ifPresent(r -> states.put(index, r.getValue())));
                    return states;
                });
    }

    /**
     * Builds the given search indexes concurrently (outside any transaction, as CONCURRENTLY requires: a
     * simple-protocol statement on an auto-commit connection),
     * one after the other, each bounded by {@code timeout}; an invalid leftover of a failed build is
     * dropped first, a valid one is kept. Locks: SHARE UPDATE EXCLUSIVE on the history while each builds
     * (settles go on; another index build or VACUUM of the history waits).
     */
    public Mono<Void> createSearchIndexes(Set<SearchIndex> indexes, Duration timeout) {
        Db slow = db.withTimeout(timeout);
        return indexStates().flatMap(states -> Flux.fromIterable(indexes.isEmpty() ? Set.<SearchIndex>of()
                        : EnumSet.copyOf(indexes))
                .concatMap(index -> {
                    String[] def = SEARCH_INDEXES.get(index);
                    String name = '"' + schema + "\"." + def[0];
                    Mono<Void> dropInvalid = Boolean.FALSE.equals(states.get(index))
                            ? slow.withConnection(c -> Db.executeScript(c, "DROP INDEX CONCURRENTLY IF EXISTS " + name)).then()
                            : Mono.empty();
                    return dropInvalid.then(slow.withConnection(c -> Db.executeScript(c, tables.render(
                            "CREATE INDEX CONCURRENTLY IF NOT EXISTS " + def[0] + " ON {history} " + def[1])))
                            .then());
                })
                .then())
                .onErrorMap(Errors::translate);
    }

    /** Drops the given search indexes concurrently, if they exist. */
    public Mono<Void> dropSearchIndexes(Set<SearchIndex> indexes) {
        return Flux.fromIterable(indexes)
                .concatMap(index -> db.withConnection(c -> Db.executeScript(c, "DROP INDEX CONCURRENTLY IF EXISTS \""
                        + schema + "\"." + SEARCH_INDEXES.get(index)[0])))
                .then()
                .onErrorMap(Errors::translate);
    }

    /**
     * A filter's conditions as SQL over one table, with its arguments numbered once for both tables.
     * Statuses come from an enum and are written as literals, so a partial index on status matches.
     */
    private static final class Where {

        private final List<Object> args = new ArrayList<>();
        private final InstanceFilter filter;
        private final int queues;
        private final int types;
        private final int correlationKey;
        private final int prefix;
        private final int prefixEnd;
        private final int state;
        private final int error;
        private final int insertedFrom;
        private final int insertedTo;
        private final int updatedFrom;
        private final int updatedTo;
        private final int eligibleFrom;
        private final int eligibleTo;
        private final int parent;
        private final int versionFrom;
        private final int versionTo;

        Where(InstanceFilter filter) {
            this.filter = filter;
            this.queues = names(filter.queues());
            this.types = names(filter.types());
            this.correlationKey = optional(filter.correlationKey());
            String start = filter.correlationKeyPrefix();
            this.prefix = optional(start);
            this.prefixEnd = start == null ? 0 : optional(upperBound(start));
            this.state = optional(filter.stateContains());
            this.error = optional(filter.errorContains());
            this.insertedFrom = optional(filter.insertedFrom());
            this.insertedTo = optional(filter.insertedTo());
            this.updatedFrom = optional(filter.updatedFrom());
            this.updatedTo = optional(filter.updatedTo());
            this.eligibleFrom = optional(filter.eligibleFrom());
            this.eligibleTo = optional(filter.eligibleTo());
            this.parent = optional(filter.parentId());
            this.versionFrom = optional(filter.typeVersionFrom());
            this.versionTo = optional(filter.typeVersionTo());
        }

        /** Adds an argument; its 1-based placeholder number. */
        int arg(Object value) {
            args.add(value);
            return args.size();
        }

        private int optional(@Nullable Object value) {
            return value == null ? 0 : arg(value);
        }

        private int names(List<String> names) {
            if (names.isEmpty()) {
                return 0;
            }
            return names.size() == 1 ? arg(names.get(0)) : arg(names.toArray(String[]::new));
        }

        /** The conditions, each followed by AND (so a keyset condition can follow). */
        String render(boolean history) {
            StringBuilder sql = new StringBuilder();
            name(sql, "queue", queues, filter.queues());
            name(sql, "type", types, filter.types());
            if (!filter.statuses().isEmpty()) {
                sql.append("status IN (").append(filter.statuses().stream().sorted()
                        .map(s -> "'" + s.sqlName() + "'").collect(Collectors.joining(", "))).append(") AND ");
            }
            if (correlationKey > 0) {
                sql.append("correlation_key = $").append(correlationKey).append(" AND ");
            }
            if (prefix > 0) {
                // The range rides the text_pattern_ops index; starts_with is the exact test.
                sql.append("correlation_key ~>=~ $").append(prefix).append(" AND ");
                if (prefixEnd > 0) {
                    sql.append("correlation_key ~<~ $").append(prefixEnd).append(" AND ");
                }
                sql.append("starts_with(correlation_key, $").append(prefix).append(") AND ");
            }
            if (state > 0) {
                sql.append("state @> $").append(state).append("::jsonb AND ");
            }
            if (error > 0) {
                sql.append("strpos(lower(last_error), lower($").append(error).append(")) > 0 AND ");
            }
            String updated = history ? "settled_at" : "updated_at";
            range(sql, "inserted_at", insertedFrom, insertedTo);
            range(sql, updated, updatedFrom, updatedTo);
            range(sql, "eligible_at", eligibleFrom, eligibleTo);
            if (parent > 0) {
                sql.append("parent_id = $").append(parent).append(" AND ");
            }
            if (versionFrom > 0) {
                sql.append("type_version >= $").append(versionFrom).append("::int AND ");
            }
            if (versionTo > 0) {
                sql.append("type_version <= $").append(versionTo).append("::int AND ");
            }
            return sql.toString();
        }

        private static void name(StringBuilder sql, String column, int index, List<String> names) {
            if (index == 0) {
                return;
            }
            sql.append(column).append(names.size() == 1 ? " = $" + index : " = ANY ($" + index + "::text[])")
                    .append(" AND ");
        }

        private static void range(StringBuilder sql, String column, int from, int to) {
            if (from > 0) {
                sql.append(column).append(" >= $").append(from).append(" AND ");
            }
            if (to > 0) {
                sql.append(column).append(" < $").append(to).append(" AND ");
            }
        }

        Statement bind(Statement statement) {
            for (int i = 0; i < args.size(); i++) {
                statement.bind(i, args.get(i));
            }
            return statement;
        }

        /**
         * The least string above every string that starts with {@code prefix} in byte order (the last
         * code point plus one), or null when there is none to use (the last code point is the highest,
         * or would become a surrogate): then only the lower bound rides the index.
         */
        private static @Nullable String upperBound(String prefix) {
            int last = prefix.codePointBefore(prefix.length());
            int next = last + 1;
            if (next > Character.MAX_CODE_POINT || (next >= Character.MIN_SURROGATE && next <= Character.MAX_SURROGATE)) {
                return null;
            }
            return prefix.substring(0, prefix.length() - Character.charCount(last)) + new String(Character.toChars(next));
        }
    }
}
