package dev.durable.benchmarks.admin;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.PageRequest;
import dev.durable.admin.StatusCount;
import dev.durable.internal.Db;
import dev.durable.internal.sql.ListingSql;
import dev.durable.internal.sql.QueueActivitySql;
import dev.durable.internal.sql.Tables;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 19's listing benchmark: a page of 50 of {@code engine.admin().list(...)} over a history of
 * {@code --rows} settled instances (90 % done, 8 % failed, 2 % cancelled, over 10 queues and 20
 * types, a third with a correlation key, inserted over 30 days in id order) and 10,000 live rows in
 * the hot table, with the history's indexes the schema ships after one VACUUM ANALYZE. The table is
 * filled once (one INSERT ... SELECT generate_series); then each filter, a combination an operator
 * would type, is listed {@code --runs} times after two warm-up calls, and one PAGE line gives its
 * median, 95th percentile and maximum, and the rows the page held. One COUNTS line times
 * {@code admin().counts()} (live rows counted, settled rows from the statistics). With
 * {@code --explain true} each filter's plan (EXPLAIN ANALYZE) is printed first.
 *
 * <p>Issue 34's fleet view: the minutes table is filled with seven days (the default retention) of ten
 * queues' activity; one ACTIVITY line per range the dashboard offers times {@code admin().activity(...)},
 * one DEPTHS line times {@code admin().depths()} over the live rows (all due: {@code --live 1000000} is a
 * backlog of a million), and one FLUSH line times an engine's flush of ten queues' counts.
 *
 * <pre>
 * benchmarks/admin [--rows 1000000] [--runs 50] [--explain true] [--live 10000]
 * </pre>
 */
public final class AdminListing {

    private static final Duration WAIT = Duration.ofMinutes(30);
    private static final int PAGE = 50;

    private AdminListing() {
    }

    /** One listing: what an operator filters by and which page. */
    private record Case(InstanceFilter filter, PageRequest page) {
    }

    public static void main(String[] args) {
        int rows = 1_000_000;
        int runs = 50;
        boolean explain = false;
        int live = 10_000;
        boolean searchIndexes = false;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--rows" -> rows = Integer.parseInt(args[i + 1]);
                case "--runs" -> runs = Integer.parseInt(args[i + 1]);
                case "--explain" -> explain = Boolean.parseBoolean(args[i + 1]);
                case "--live" -> live = Integer.parseInt(args[i + 1]);
                case "--search-indexes" -> searchIndexes = Boolean.parseBoolean(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        TestDatabase database = TestPostgres.newDatabase("admin_listing");
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().url(database.url())
                .schema(database.schema()).poolMaxSize(4).build()).build();
        try {
            engine.migrate().block(WAIT);
            long filling = System.nanoTime();
            fill(database, rows, live);
            System.err.printf(Locale.ROOT, "[admin] filled %d history rows and %d live rows in %.0f s%n", rows, live,
                    (System.nanoTime() - filling) / 1e9);
            DurableAdmin admin = engine.admin();
            if (searchIndexes) {
                long building = System.nanoTime();
                admin.createSearchIndexes(java.util.EnumSet.allOf(dev.durable.admin.SearchIndex.class)).block(WAIT);
                System.err.printf(Locale.ROOT, "[admin] built the opt-in search indexes in %.0f s%n",
                        (System.nanoTime() - building) / 1e9);
            }
            long half = rows / 2;
            Instant start = Instant.parse("2026-01-01T00:00:00Z");
            Map<String, Case> cases = new LinkedHashMap<>();
            PageRequest newest = PageRequest.newestFirst(PAGE);
            PageRequest oldest = PageRequest.oldestFirst(PAGE);
            cases.put("none", new Case(InstanceFilter.all(), newest));
            cases.put("deep-page", new Case(InstanceFilter.all(), newest.after(PageRequest.cursorFor(
                    half))));
            cases.put("queue", new Case(InstanceFilter.builder().queue("q3").build(), newest));
            cases.put("queue+failed", new Case(InstanceFilter.builder().queue("q3")
                    .status(InstanceStatus.FAILED).build(), newest));
            cases.put("queue+failed+oldest", new Case(InstanceFilter.builder().queue("q2")
                    .status(InstanceStatus.FAILED).build(), oldest));
            cases.put("queue+type", new Case(InstanceFilter.builder().queue("q3").type("t13").build(),
                    newest));
            cases.put("type+state", new Case(InstanceFilter.builder().type("t7")
                    .stateContains("{\"customer\": 427}").build(), newest));
            cases.put("state-rare", new Case(InstanceFilter.builder()
                    .stateContains("{\"n\": 4242}").build(), newest));
            cases.put("correlation-prefix", new Case(InstanceFilter.builder()
                    .correlationKeyPrefix("order/12").build(), newest));
            cases.put("correlation-exact", new Case(InstanceFilter.builder()
                    .correlationKey("order/" + 3 * (half / 3)).build(), newest));
            cases.put("failed+error", new Case(InstanceFilter.builder().status(InstanceStatus.FAILED)
                    .errorContains("timeout").build(), newest));
            cases.put("queue+inserted-range", new Case(InstanceFilter.builder().queue("q5")
                    .insertedBetween(start.plus(Duration.ofDays(10)), start.plus(Duration.ofDays(11))).build(),
                    newest));
            cases.put("queue+type+status+range", new Case(InstanceFilter.builder().queue("q2").type("t2")
                    .status(InstanceStatus.DONE, InstanceStatus.FAILED)
                    .updatedBetween(start.plus(Duration.ofDays(20)), null).build(), newest));
            ListingSql sql = new ListingSql(new Db(ConnectionFactories.get(database.url()), Duration.ofMinutes(5)),
                    new Tables(database.schema()));
            for (Map.Entry<String, Case> entry : cases.entrySet()) {
                Case c = entry.getValue();
                if (explain) {
                    System.out.println("EXPLAIN " + entry.getKey() + "\n" + String.join("\n", sql.explainPage(c.filter(),
                            c.page().order() == PageRequest.Order.NEWEST_FIRST, c.page().startAfter(),
                            c.page().size() + 1).collectList().block(WAIT)));
                }
                int[] size = new int[1];
                double[] millis = time(runs, () -> size[0] = admin.list(c.filter(), c.page()).block(WAIT).items()
                        .size());
                System.out.println(String.format(Locale.ROOT, "PAGE rows=%d live=%d filter=%s page_rows=%d median_ms=%.2f"
                        + " p95_ms=%.2f max_ms=%.2f", rows, live, entry.getKey(), size[0], millis[0], millis[1],
                        millis[2]));
            }
            List<StatusCount>[] counts = new List[1];
            double[] millis = time(runs, () -> {
                counts[0] = admin.counts().block(WAIT);
                return counts[0].size();
            });
            long settled = counts[0].stream().filter(c -> c.status().isTerminal()).mapToLong(StatusCount::count).sum();
            System.out.println(String.format(Locale.ROOT, "COUNTS rows=%d live=%d groups=%d settled_estimated=%d"
                    + " median_ms=%.2f p95_ms=%.2f max_ms=%.2f", rows, live, counts[0].size(), settled, millis[0],
                    millis[1], millis[2]));
            fleetView(database, admin, rows, live, runs);
        } finally {
            engine.closeLater().block(WAIT);
            database.close();
        }
    }

    /** Issue 34: the activity ranges, the depths and a flush, over a week of ten queues' minutes. */
    private static void fleetView(TestDatabase database, DurableAdmin admin, int rows, int live, int runs) {
        String minutes = '"' + database.schema() + "\".durable_queue_minutes";
        execute(database, "INSERT INTO " + minutes + " (minute, queue, completed, failed, retried)"
                + " SELECT m, 'q' || q, 1000 + q, q, 2 * q"
                + " FROM generate_series(date_trunc('minute', now()) - interval '7 days', date_trunc('minute', now()),"
                + " interval '1 minute') AS m, generate_series(0, 9) AS q");
        execute(database, "VACUUM ANALYZE " + minutes);
        Map<String, Duration[]> ranges = new LinkedHashMap<>();
        ranges.put("1h", new Duration[] {Duration.ofHours(1), Duration.ofMinutes(1)});
        ranges.put("24h", new Duration[] {Duration.ofHours(24), Duration.ofMinutes(15)});
        ranges.put("7d", new Duration[] {Duration.ofDays(7), Duration.ofHours(2)});
        for (String queue : new String[] {null, "q3"}) {
            for (Map.Entry<String, Duration[]> range : ranges.entrySet()) {
                int[] size = new int[1];
                double[] millis = time(runs, () -> size[0] = admin.activity(range.getValue()[0], range.getValue()[1],
                        queue).block(WAIT).size());
                System.out.println(String.format(Locale.ROOT, "ACTIVITY rows=%d range=%s queue=%s buckets=%d"
                        + " median_ms=%.2f p95_ms=%.2f max_ms=%.2f", rows, range.getKey(), queue == null ? "all" : queue,
                        size[0], millis[0], millis[1], millis[2]));
            }
        }
        long[] due = new long[1];
        double[] millis = time(runs, () -> {
            due[0] = admin.depths().block(WAIT).stream().mapToLong(dev.durable.admin.QueueDepth::due).sum();
            return (int) due[0];
        });
        System.out.println(String.format(Locale.ROOT, "DEPTHS live=%d due=%d median_ms=%.2f p95_ms=%.2f max_ms=%.2f",
                live, due[0], millis[0], millis[1], millis[2]));
        // Pooled, as an engine's connections are: the flush's own cost, not a connection's setup.
        io.r2dbc.pool.ConnectionPool pool = new io.r2dbc.pool.ConnectionPool(io.r2dbc.pool.ConnectionPoolConfiguration
                .builder(ConnectionFactories.get(database.url())).initialSize(1).maxSize(1).build());
        QueueActivitySql sql = new QueueActivitySql(new Db(pool, Duration.ofMinutes(5)), new Tables(database.schema()));
        String[] queues = new String[10];
        Long[] counts = new Long[10];
        for (int q = 0; q < 10; q++) {
            queues[q] = "q" + q;
            counts[q] = 100L;
        }
        double[] flush = time(runs, () -> {
            sql.add(queues, counts, counts, counts, counts, counts).block(WAIT);
            return 0;
        });
        System.out.println(String.format(Locale.ROOT, "FLUSH queues=10 median_ms=%.2f p95_ms=%.2f max_ms=%.2f",
                flush[0], flush[1], flush[2]));
        pool.dispose();
    }

    /** Median, 95th percentile and maximum in milliseconds of {@code runs} calls, after two warm-up calls. */
    private static double[] time(int runs, Supplier<Integer> call) {
        call.get();
        call.get();
        double[] millis = new double[runs];
        for (int i = 0; i < runs; i++) {
            long started = System.nanoTime();
            call.get();
            millis[i] = (System.nanoTime() - started) / 1e6;
        }
        Arrays.sort(millis);
        return new double[] {millis[runs / 2], millis[Math.min(runs - 1, (int) Math.ceil(runs * 0.95) - 1)],
                millis[runs - 1]};
    }

    /** One INSERT ... SELECT generate_series into the history, the live rows, then VACUUM ANALYZE. */
    static void fill(TestDatabase database, int rows) {
        fill(database, rows, 10_000);
    }

    /** As {@link #fill(TestDatabase, int)} with {@code live} runnable rows in the hot table. */
    static void fill(TestDatabase database, int rows, int live) {
        fill(database, rows, live, true);
    }

    /** As {@link #fill(TestDatabase, int, int)}; without {@code keyed}, no row has a correlation key (plain jobs). */
    static void fill(TestDatabase database, int rows, int live, boolean keyed) {
        String history = '"' + database.schema() + "\".durable_history";
        String instances = '"' + database.schema() + "\".durable_instances";
        String failed = "g % 50 BETWEEN 1 AND 4";
        execute(database, "INSERT INTO " + history + " (id, type, type_version, queue, priority, status, step, state,"
                + " last_error, attempt, max_attempts, eligible_at, correlation_key, inserted_at, settled_at)"
                + " SELECT g, 't' || (g % 20), 1, 'q' || (g % 10), 0,"
                + " CASE WHEN g % 50 = 0 THEN 'cancelled' WHEN " + failed + " THEN 'failed' ELSE 'done' END, 'run',"
                + " jsonb_build_object('customer', g % 1000, 'n', g),"
                + " CASE WHEN " + failed + " THEN CASE WHEN g % 3 = 0 THEN 'timeout after 30 s calling the bank'"
                + " ELSE 'card declined' END END,"
                + " 1, 20, ts, CASE WHEN " + keyed + " AND g % 3 = 0 THEN 'order/' || g END, ts, ts + interval '1 second'"
                + " FROM (SELECT g, timestamptz '2026-01-01' + (g::float8 / " + rows + ") * interval '30 days' AS ts"
                + " FROM generate_series(1, " + rows + ") AS g) s");
        execute(database, "SELECT setval(pg_get_serial_sequence('" + instances + "', 'id'), " + rows + ")");
        execute(database, "INSERT INTO " + instances + " (type, queue, step, state, max_attempts)"
                + " SELECT 't' || (g % 20), 'q' || (g % 10), 'run', jsonb_build_object('customer', g % 1000), 20"
                + " FROM generate_series(1, " + live + ") AS g");
        execute(database, "VACUUM ANALYZE " + history);
        execute(database, "VACUUM ANALYZE " + instances);
    }

    static void execute(TestDatabase database, String sql) {
        Mono.usingWhen(ConnectionFactories.get(database.url()).create(),
                (Connection c) -> Flux.from(c.createStatement(sql).execute())
                        .concatMap(result -> result.getRowsUpdated()).then(),
                Connection::close).block(WAIT);
    }
}
