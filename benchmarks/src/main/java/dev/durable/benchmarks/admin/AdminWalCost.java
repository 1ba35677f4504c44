package dev.durable.benchmarks.admin;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.Locale;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What migration V4's history indexes cost per settled instance: the WAL and the index bytes that
 * {@code --rows} history rows (shaped as {@link AdminListing}'s) write at schema version 3 and at
 * version 4, then of each index of V4 alone on a version-3 schema; then each index's size per row.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.durable.benchmarks.admin.AdminWalCost [--rows 200000]
 * </pre>
 */
public final class AdminWalCost {

    private static final Duration WAIT = Duration.ofMinutes(30);

    private AdminWalCost() {
    }

    public static void main(String[] args) {
        int rows = args.length == 2 && args[0].equals("--rows") ? Integer.parseInt(args[1]) : 200_000;
        TestDatabase database = TestPostgres.newDatabase("admin_wal");
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().url(database.url())
                .schema(database.schema()).poolMaxSize(4).build()).build();
        try {
            engine.migrate().block(WAIT);
            long[] perVersion = new long[2];
            for (int version : new int[] {3, 4}) {
                if (version == 3) {
                    engine.migrateDown(3).block(WAIT);
                } else {
                    engine.migrate().block(WAIT);
                }
                AdminListing.execute(database, "TRUNCATE \"" + database.schema() + "\".durable_history, \""
                        + database.schema() + "\".durable_instances");
                AdminListing.execute(database, "CHECKPOINT");
                long before = lsn(database);
                AdminListing.fill(database, rows);
                perVersion[version - 3] = lsn(database) - before;
                System.out.println(String.format(Locale.ROOT, "WAL version=%d rows=%d wal_bytes_per_row=%.0f", version,
                        rows, (double) perVersion[version - 3] / rows));
            }
            System.out.println(String.format(Locale.ROOT, "WAL v4_extra_bytes_per_row=%.0f",
                    (double) (perVersion[1] - perVersion[0]) / rows));
            // Each index of V4 alone on a version-3 schema: its own share.
            engine.migrateDown(3).block(WAIT);
            String history = "\"" + database.schema() + "\".durable_history";
            String[][] indexes = {
                    {"durable_history_queue_idx", "(queue, id)"},
                    {"durable_history_type_idx", "(type, id)"},
                    {"durable_history_correlation_idx", "(correlation_key text_pattern_ops) WHERE correlation_key IS NOT NULL"},
                    {"durable_history_state_idx", "USING gin (state jsonb_path_ops)"},
                    {"durable_history_inserted_brin", "USING brin (inserted_at)"}};
            for (String[] index : indexes) {
                AdminListing.execute(database, "CREATE INDEX " + index[0] + " ON " + history + " " + index[1]);
                AdminListing.execute(database, "TRUNCATE " + history + ", \"" + database.schema()
                        + "\".durable_instances");
                AdminListing.execute(database, "CHECKPOINT");
                long before = lsn(database);
                AdminListing.fill(database, rows);
                long wal = lsn(database) - before;
                System.out.println(String.format(Locale.ROOT, "WAL index=%s extra_bytes_per_row=%.0f", index[0],
                        (double) (wal - perVersion[0]) / rows));
                AdminListing.execute(database, "DROP INDEX \"" + database.schema() + "\"." + index[0]);
            }
            engine.migrate().block(WAIT);
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

    private static long lsn(TestDatabase database) {
        return query(database, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn");
    }

    private static long query(TestDatabase database, String sql) {
        return Mono.usingWhen(ConnectionFactories.get(database.url()).create(),
                (Connection c) -> Flux.from(c.createStatement(sql).execute())
                        .concatMap(result -> result.map(row -> ((Number) row.get(0)).longValue())).next(),
                Connection::close).block(WAIT);
    }
}
