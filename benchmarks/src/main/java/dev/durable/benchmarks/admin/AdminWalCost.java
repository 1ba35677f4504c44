package dev.durable.benchmarks.admin;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.admin.SearchIndex;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What the admin API's history indexes cost per settled instance: the WAL that {@code --rows} history
 * rows (shaped as {@link AdminListing}'s) write without the history indexes the schema ships for the
 * admin's listings ({@link #ADMIN_INDEXES}, dropped), with them (the schema as shipped), and with the
 * opt-in search indexes too ({@link SearchIndex}), each for rows a third of which have a correlation
 * key and for plain rows without one; then of each index alone over the history without the admin's
 * indexes, and each index's size per row.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.durable.benchmarks.admin.AdminWalCost [--rows 200000]
 * </pre>
 */
public final class AdminWalCost {

    private static final Duration WAIT = Duration.ofMinutes(30);

    /**
     * The history's indexes the schema ships for the admin's listings (V1__baseline.sql, "Indexes",
     * durable_history): the history's primary key, parent, settled-time and unsuccessful indexes serve
     * the engine itself and stay.
     */
    private static final List<String> ADMIN_INDEXES = List.of("durable_history_correlation_idx",
            "durable_history_inserted_brin");

    private AdminWalCost() {
    }

    public static void main(String[] args) {
        int rows = args.length == 2 && args[0].equals("--rows") ? Integer.parseInt(args[1]) : 200_000;
        TestDatabase database = TestPostgres.newDatabase("admin_wal");
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().url(database.url())
                .schema(database.schema()).poolMaxSize(4).build()).build();
        String history = "\"" + database.schema() + "\".durable_history";
        try {
            engine.migrate().block(WAIT);
            List<String> shipped = new ArrayList<>();
            for (String index : ADMIN_INDEXES) {
                shipped.add(text(database, "SELECT indexdef FROM pg_indexes WHERE schemaname = '" + database.schema()
                        + "' AND indexname = '" + index + "'"));
            }
            for (boolean keyed : new boolean[] {true, false}) {
                String shape = keyed ? "keyed_third" : "plain";
                dropAdminIndexes(database);
                long without = walOfFill(database, rows, keyed);
                shipped.forEach(definition -> AdminListing.execute(database, definition));
                long asShipped = walOfFill(database, rows, keyed);
                engine.admin().createSearchIndexes(EnumSet.allOf(SearchIndex.class)).block(WAIT);
                long optIn = walOfFill(database, rows, keyed);
                engine.admin().dropSearchIndexes(EnumSet.allOf(SearchIndex.class)).block(WAIT);
                System.out.println(String.format(Locale.ROOT, "WAL rows=%s without_admin_indexes_bytes_per_row=%.0f"
                        + " admin_indexes_extra_bytes_per_row=%.0f with_search_indexes_extra_bytes_per_row=%.0f",
                        shape, (double) without / rows, (double) (asShipped - without) / rows,
                        (double) (optIn - without) / rows));
            }
            // Each index alone over the history without the admin's indexes: its own share (rows a third
            // of which are keyed).
            dropAdminIndexes(database);
            long base = walOfFill(database, rows, true);
            String[][] indexes = {
                    {"durable_history_queue_idx", "(queue, id)"},
                    {"durable_history_correlation_idx", "(correlation_key text_pattern_ops) WHERE correlation_key IS NOT NULL"},
                    {"durable_history_inserted_brin", "USING brin (inserted_at)"},
                    {"durable_history_type_idx", "(type, id)"},
                    {"durable_history_state_idx", "USING gin (state jsonb_path_ops)"}};
            for (String[] index : indexes) {
                AdminListing.execute(database, "CREATE INDEX " + index[0] + " ON " + history + " " + index[1]);
                long wal = walOfFill(database, rows, true);
                System.out.println(String.format(Locale.ROOT, "WAL index=%s extra_bytes_per_row=%.0f", index[0],
                        (double) (wal - base) / rows));
                AdminListing.execute(database, "DROP INDEX \"" + database.schema() + "\"." + index[0]);
            }
            shipped.forEach(definition -> AdminListing.execute(database, definition));
            engine.admin().createSearchIndexes(EnumSet.allOf(SearchIndex.class)).block(WAIT);
            AdminListing.execute(database, "TRUNCATE " + history + ", \"" + database.schema()
                    + "\".durable_instances");
            AdminListing.fill(database, rows);
            for (String index : new String[] {"durable_history_queue_idx", "durable_history_type_idx",
                    "durable_history_correlation_idx", "durable_history_state_idx", "durable_history_inserted_brin",
                    "durable_history_pkey", "durable_history_unsuccessful_idx"}) {
                long bytes = query(database, "SELECT pg_relation_size('\"" + database.schema() + "\"." + index + "')");
                System.out.println(String.format(Locale.ROOT, "INDEX %s bytes_per_row=%.1f", index,
                        (double) bytes / rows));
            }
        } finally {
            engine.closeLater().block(WAIT);
            database.close();
        }
    }

    private static void dropAdminIndexes(TestDatabase database) {
        for (String index : ADMIN_INDEXES) {
            AdminListing.execute(database, "DROP INDEX IF EXISTS \"" + database.schema() + "\"." + index);
        }
    }

    /** The WAL of filling an emptied history with {@code rows} rows (and the 10,000 live ones). */
    private static long walOfFill(TestDatabase database, int rows, boolean keyed) {
        AdminListing.execute(database, "TRUNCATE \"" + database.schema() + "\".durable_history, \""
                + database.schema() + "\".durable_instances");
        AdminListing.execute(database, "CHECKPOINT");
        long before = lsn(database);
        AdminListing.fill(database, rows, 10_000, keyed);
        return lsn(database) - before;
    }

    private static long lsn(TestDatabase database) {
        return query(database, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn");
    }

    private static String text(TestDatabase database, String sql) {
        return Mono.usingWhen(ConnectionFactories.get(database.url()).create(),
                (Connection c) -> Flux.from(c.createStatement(sql).execute())
                        .concatMap(result -> result.map(row -> row.get(0, String.class))).next(),
                Connection::close).block(WAIT);
    }

    private static long query(TestDatabase database, String sql) {
        return Mono.usingWhen(ConnectionFactories.get(database.url()).create(),
                (Connection c) -> Flux.from(c.createStatement(sql).execute())
                        .concatMap(result -> result.map(row -> ((Number) row.get(0)).longValue())).next(),
                Connection::close).block(WAIT);
    }
}
