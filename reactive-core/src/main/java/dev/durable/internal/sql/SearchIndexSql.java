package dev.durable.internal.sql;

import dev.durable.admin.SearchIndex;
import java.time.Duration;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The opt-in search indexes over the history ({@code SearchIndex}): which exist and are valid, and
 * their concurrent builds and drops.
 */
public final class SearchIndexSql {

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

    private final Db db;
    private final Tables tables;
    private final String schema;

    public SearchIndexSql(Db db, Tables tables, String schema) {
        this.db = db;
        this.tables = tables;
        this.schema = schema;
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
}
