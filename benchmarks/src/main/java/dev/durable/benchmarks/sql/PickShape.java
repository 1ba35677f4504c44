package dev.durable.benchmarks.sql;

import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 16's flat-pick benchmark: the pick statement ({@code PickSql.pick}, 100 rows) over three
 * backlog shapes of one queue, each with 10 due rows to claim:
 * <ul>
 *   <li>{@code empty}: only the 10 due rows;</li>
 *   <li>{@code future}: N rows scheduled an hour ahead at a more urgent priority (retries with
 *       backoff, runIn), which sit in the pick index ahead of the due rows;</li>
 *   <li>{@code blocked}: N runnable rows of a concurrency key whose one row is executing, due
 *       before the 10 others, so they sit in the pick index ahead of them too.</li>
 * </ul>
 * Each pick runs in a transaction that is rolled back, so every pick sees the same backlog. Prints
 * one line per shape: median and p90 of the timed picks (up to {@code --picks}, within 30 s, after
 * up to 10 s of warm-up) as the client sees them, the median server execution time of up to 21
 * EXPLAIN ANALYZE runs, the shared buffers the statement touched, the rows it claimed, the ratios
 * to {@code empty} and, with {@code --explain}, the plan.
 *
 * <pre>benchmarks/pick-shape [--rows 1000000] [--picks 200] [--explain]</pre>
 */
public final class PickShape {

    private static final int DUE = 10;
    private static final Duration WAIT = Duration.ofMinutes(10);
    /** The time spent timing picks of one shape (at least 5 picks), and a third of it warming up. */
    private static final long BUDGET_NANOS = 30_000_000_000L;

    private PickShape() {
    }

    public static void main(String[] args) {
        int rows = 1_000_000;
        int picks = 200;
        boolean explain = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rows" -> rows = Integer.parseInt(args[++i]);
                case "--picks" -> picks = Integer.parseInt(args[++i]);
                case "--explain" -> explain = true;
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        List<Shape> results = new ArrayList<>();
        for (String shape : List.of("empty", "future", "blocked")) {
            try (BenchDatabase db = new BenchDatabase("shape_" + shape)) {
                fill(db, shape, rows);
                results.add(measure(db, shape, picks, explain));
            }
        }
        Shape empty = results.get(0);
        for (Shape shape : results) {
            System.out.printf(Locale.ROOT, "PICK shape=%s rows=%d picks=%d median_us=%d p90_us=%d server_us=%d"
                            + " buffers=%d claimed=%d ratio=%.2f server_ratio=%.2f buffers_ratio=%.2f%n",
                    shape.name, shape.name.equals("empty") ? DUE : rows + DUE, shape.picks, shape.medianMicros,
                    shape.p90Micros, shape.serverMicros, shape.buffers, shape.claimed,
                    (double) shape.medianMicros / empty.medianMicros,
                    (double) shape.serverMicros / empty.serverMicros, (double) shape.buffers / empty.buffers);
        }
        System.exit(0);
    }

    /** The shape's rows, then VACUUM ANALYZE so the plan is the one a settled table gets. */
    static void fill(BenchDatabase db, String shape, int rows) {
        String insert = "INSERT INTO " + db.instances() + " (type, queue, step, state, max_attempts, priority,"
                + " eligible_at, concurrency_key) SELECT 'noop', '" + BenchDatabase.QUEUE + "', 'run', to_jsonb(g), 20, ";
        switch (shape) {
            case "empty" -> { }
            case "future" -> db.execute(insert + "-1, now() + interval '1 hour', NULL FROM generate_series(1, "
                    + rows + ") AS g");
            case "blocked" -> {
                db.execute(insert + "0, now() - interval '1 hour' + g * interval '1 microsecond', 'busy'"
                        + " FROM generate_series(1, " + rows + ") AS g");
                db.execute("INSERT INTO " + db.instances() + " (type, queue, step, state, max_attempts, status,"
                        + " claimed_by, lease_expires_at, concurrency_key) VALUES ('noop', '" + BenchDatabase.QUEUE
                        + "', 'run', '0', 20, 'executing', 'elsewhere', now() + interval '1 hour', 'busy')");
            }
            default -> throw new IllegalArgumentException(shape);
        }
        db.execute(insert + "0, now(), NULL FROM generate_series(1, " + DUE + ") AS g");
        db.execute("VACUUM ANALYZE " + db.instances());
    }

    static Shape measure(BenchDatabase db, String shape, int picks, boolean explain) {
        Connection connection = db.admin();
        long warmEnd = System.nanoTime() + BUDGET_NANOS / 3;
        for (int i = 0; i < picks && System.nanoTime() < warmEnd; i++) {
            pick(db, connection);
        }
        long[] micros = new long[picks];
        long claimed = 0;
        int timed = 0;
        long end = System.nanoTime() + BUDGET_NANOS;
        while (timed < picks && (timed < 5 || System.nanoTime() < end)) {
            long start = System.nanoTime();
            claimed = pick(db, connection);
            micros[timed++] = (System.nanoTime() - start) / 1000;
        }
        micros = Arrays.copyOf(micros, timed);
        Arrays.sort(micros);
        long[] server = new long[Math.min(timed, 21)];
        List<String> plan = List.of();
        for (int i = 0; i < server.length; i++) {
            plan = explain(connection, explainable(db));
            server[i] = plan.stream().filter(line -> line.startsWith("Execution Time:")).findFirst()
                    .map(line -> (long) (1000 * Double.parseDouble(line.replaceAll("[^0-9.]", "")))).orElse(-1L);
        }
        Arrays.sort(server);
        long buffers = plan.stream().filter(line -> line.contains("Buffers: shared"))
                .findFirst().map(PickShape::buffers).orElse(-1L);
        if (explain) {
            System.out.println("== pick over the " + shape + " backlog");
            plan.forEach(System.out::println);
        }
        return new Shape(shape, timed, micros[timed / 2], micros[timed * 9 / 10], server[server.length / 2], buffers,
                claimed);
    }

    /** The claimed rows of one pick of 100, rolled back. */
    private static long pick(BenchDatabase db, Connection connection) {
        return Mono.from(connection.beginTransaction())
                .thenMany(db.statements.picks().pick(connection, BenchDatabase.QUEUE, 100, BenchDatabase.WORKER,
                        BenchDatabase.LEASE_MILLIS))
                .count()
                .flatMap(n -> Mono.from(connection.rollbackTransaction()).thenReturn(n))
                .block(WAIT);
    }

    static String explainable(BenchDatabase db) {
        return db.statements.picks().pickText().replace("$1", "'" + BenchDatabase.QUEUE + "'").replace("$2", "100")
                .replace("$3", "'" + BenchDatabase.WORKER + "'")
                .replace("$4", Long.toString(BenchDatabase.LEASE_MILLIS))
                .replace("$5", "ARRAY['noop']").replace("$6", "ARRAY[1]");
    }

    private static long buffers(String line) {
        long total = 0;
        for (String part : line.substring(line.indexOf("shared") + 6).trim().split(" ")) {
            int eq = part.indexOf('=');
            if (eq > 0 && (part.startsWith("hit") || part.startsWith("read"))) {
                total += Long.parseLong(part.substring(eq + 1).replace(",", ""));
            }
        }
        return total;
    }

    static List<String> explain(Connection connection, String statement) {
        return Mono.from(connection.beginTransaction())
                .thenMany(Flux.from(connection.createStatement("EXPLAIN (ANALYZE, BUFFERS) " + statement).execute())
                        .concatMap(result -> result.map(row -> row.get(0, String.class))))
                .collectList()
                .flatMap(lines -> Mono.from(connection.rollbackTransaction()).thenReturn(lines))
                .block(WAIT);
    }

    record Shape(String name, int picks, long medianMicros, long p90Micros, long serverMicros, long buffers,
            long claimed) {
    }
}
