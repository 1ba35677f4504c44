package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.admin.InstanceFilter;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The admin's listing and search, and the reads a bulk action walks (the ids a filter matches, the
 * highest id). The listing's text depends on which filters are given (each combination is one
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
 * first does. Locks: none.
 */
public final class ListingSql {

    /**
     * A history row read as the columns of an instance ({@code InstanceSql.INSTANCE_COLUMNS}): the
     * history's own part of the listing, so each part keeps its own indexes and keyset order (the view
     * durable_instances_all would do for one table's plan, not for the per-part sort it needs).
     */
    static final String HISTORY_AS_INSTANCE = """
            id, type, type_version, queue, priority, status, step, state::text AS state,
            result::text AS result, last_error, attempt, max_attempts, eligible_at,
            NULL::text[] AS awaited_signals, NULL::timestamptz AS await_deadline, parent_id,
            0 AS children_pending, concurrency_key, correlation_key, NULL::text AS claimed_by,
            NULL::timestamptz AS lease_expires_at, false AS cancel_requested, inserted_at,
            settled_at AS updated_at""";

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

    /** The highest id in either table: a bulk action's upper bound. Index: both primary keys (their last entry). */
    private final String maxId;

    public ListingSql(Db db, Tables tables) {
        this.db = db;
        this.tables = tables;
        this.maxId = tables.render("SELECT greatest((SELECT max(id) FROM {instances}), (SELECT max(id) FROM {history}),"
                + " 0)");
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
                            FilterConditions where = new FilterConditions(filter);
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
                    FilterConditions where = new FilterConditions(filter);
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
        FilterConditions where = new FilterConditions(filter);
        String sql = tables.render("EXPLAIN (FORMAT JSON) SELECT 1 FROM {history} WHERE " + where.render(true)
                + "id " + (newestFirst ? "<" : ">") + " $" + where.arg(startAfter));
        return Flux.from(where.bind(connection.createStatement(sql)).execute())
                .concatMap(result -> result.map(row -> row.get(0, String.class)))
                .collect(Collectors.joining())
                .map(plan -> {
                    java.util.regex.Matcher rows = PLAN_ROWS.matcher(plan);
                    return rows.find() && Double.parseDouble(rows.group(1)) <= SORT_AT_MOST;
                });
    }

    /** The most history rows of a time range a page fetches by index and sorts (see {@link #sortHistory}). */
    static final long SORT_AT_MOST = 50_000;
    private static final java.util.regex.Pattern PLAN_ROWS = java.util.regex.Pattern.compile(
            "\"Plan Rows\":\\s*([0-9.eE+]+)");

    private String pageText(FilterConditions where, InstanceFilter filter, boolean newestFirst, long startAfter, int limit,
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
        FilterConditions where = new FilterConditions(filter);
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
        FilterConditions where = new FilterConditions(filter);
        String sql = "SELECT count(*) AS n, max(id) AS last FROM (" + idsText(where, filter, afterId, upTo, limit)
                + ") chunk";
        return db.inTransaction(connection -> Db.execute(connection, CUSTOM_PLAN)
                        .thenMany(Flux.from(where.bind(connection.createStatement(sql)).execute()))
                        .concatMap(result -> result.map(row -> new Chunk(row.get("n", Long.class),
                                row.get("last", Long.class)))))
                .single()
                .onErrorMap(Errors::translate);
    }

    private String idsText(FilterConditions where, InstanceFilter filter, long afterId, long upTo, int limit) {
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
}
