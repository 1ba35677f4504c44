package dev.durable.benchmarks.maintenance;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Maintenance;
import dev.durable.QueueOptions;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Row;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 16's maintenance benchmark: one engine runs no-op jobs at its own throughput (a producer
 * keeps a backlog in front of it) for N minutes with a retention of seconds, and the table's row
 * count must stay bounded: the garbage collector, a pass of batches while they come back full,
 * keeps up with the engine instead of deleting a fixed 1,000 rows per tick. Prints a SAMPLE line
 * every few seconds (jobs done, throughput, rows of both tables and settled rows among them, and per
 * table, the hot one and the history settled rows move to, its rows, live and dead tuples and size;
 * rows GC deleted) and one MAINTENANCE line at the end; exits 1 when the rows were not bounded.
 *
 * <pre>
 * benchmarks/maintenance [--minutes 5] [--retention-seconds 5] [--sample-seconds 10]
 *                        [--gc-interval-ms 5000] [--gc-batch 1000] [--gc-budget-ms 4000]
 * </pre>
 *
 * The bound: the backlog the producer keeps and the rows claimed, plus the rows that settle during
 * the retention and two GC ticks at the highest throughput seen, with half again as slack. Samples
 * before the first retention and two ticks have passed are not held to it. {@code --gc-budget-ms 1}
 * ends every pass after its first batch, as the old maintenance did (one batch per tick), to show
 * the table grow without the loop.
 */
public final class SustainedLoad {

    private static final String QUEUE = "load";
    private static final int CONCURRENCY = 64;
    private static final int PREFETCH = 64;
    private static final Duration WAIT = Duration.ofMinutes(1);

    private record Settings(double minutes, int retentionSeconds, int sampleSeconds, long gcIntervalMillis,
            int gcBatch, long gcBudgetMillis) {

        static Settings parse(String[] args) {
            double minutes = 5;
            int retention = 5;
            int sample = 10;
            long interval = EngineOptions.DEFAULT_REAPER_INTERVAL.toMillis();
            int batch = Maintenance.TaskOptions.DEFAULT_BATCH_SIZE;
            long budget = Maintenance.TaskOptions.DEFAULT_BUDGET.toMillis();
            for (int i = 0; i + 1 < args.length; i += 2) {
                String value = args[i + 1];
                switch (args[i]) {
                    case "--minutes" -> minutes = Double.parseDouble(value);
                    case "--retention-seconds" -> retention = Integer.parseInt(value);
                    case "--sample-seconds" -> sample = Integer.parseInt(value);
                    case "--gc-interval-ms" -> interval = Long.parseLong(value);
                    case "--gc-batch" -> batch = Integer.parseInt(value);
                    case "--gc-budget-ms" -> budget = Long.parseLong(value);
                    default -> throw new IllegalArgumentException("unknown option " + args[i]);
                }
            }
            return new Settings(minutes, retention, sample, interval, batch, budget);
        }
    }

    /** One table's rows, settled rows among them, live and dead tuples and size in bytes. */
    private record TableSample(long rows, long settled, long liveTuples, long deadTuples, long bytes) {

        String line(String prefix) {
            return String.format(Locale.ROOT, "%s_rows=%d %s_live_tup=%d %s_dead_tup=%d %s_mb=%.1f", prefix, rows,
                    prefix, liveTuples, prefix, deadTuples, prefix, bytes / 1048576.0);
        }
    }

    /**
     * One look at both tables: the hot one (live rows, and settled rows whose correlation key stays
     * occupied) and the history, where settling moves rows and from which GC deletes them.
     */
    private record Sample(double seconds, long done, double jobsPerSecond, TableSample hot, TableSample history,
            long gcDeleted) {

        long rows() {
            return hot.rows() + history.rows();
        }

        long settled() {
            return hot.settled() + history.settled();
        }

        String line() {
            return String.format(Locale.ROOT, "SAMPLE t=%.0fs done=%d jobs_per_s=%.0f rows=%d settled=%d %s %s"
                    + " gc_deleted=%d", seconds, done, jobsPerSecond, rows(), settled(), hot.line("hot"),
                    history.line("history"), gcDeleted);
        }
    }

    private SustainedLoad() {
    }

    public static void main(String[] args) throws Exception {
        Settings settings = Settings.parse(args);
        TestDatabase db = TestPostgres.newDatabase("sustained");
        EngineOptions options = EngineOptions.builder().url(db.url()).schema(db.schema()).poolMaxSize(8)
                .handlerScheduler(Schedulers.parallel())
                .retention(Duration.ofSeconds(settings.retentionSeconds()))
                .garbageCollector(Maintenance.TaskOptions.every(Duration.ofMillis(settings.gcIntervalMillis()))
                        .withBatchSize(settings.gcBatch()).withBudget(Duration.ofMillis(settings.gcBudgetMillis())))
                .queue(QueueOptions.builder(QUEUE).concurrency(CONCURRENCY).prefetch(PREFETCH).minDemand(32).build())
                .build();
        DurableEngine engine = DurableEngine.builder(options)
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty()).queue(QUEUE))
                .build();
        engine.start().block(WAIT);
        System.err.println("[maintenance] " + settings + "; engine: concurrency " + CONCURRENCY + ", prefetch "
                + PREFETCH + ", garbageCollector " + options.garbageCollector() + ", retention " + options.retention());

        AtomicBoolean running = new AtomicBoolean(true);
        AtomicLong inserted = new AtomicLong();
        Thread producer = new Thread(() -> Backlog.keep(engine, QUEUE, running, inserted, "maintenance"),
                "sustained-producer");
        producer.setDaemon(true);
        producer.start();

        List<Sample> samples = new ArrayList<>();
        long started = System.nanoTime();
        long end = started + (long) (settings.minutes() * 60e9);
        long lastDone = 0;
        double lastSeconds = 0;
        try {
            while (System.nanoTime() < end) {
                Thread.sleep(settings.sampleSeconds() * 1000L);
                double seconds = (System.nanoTime() - started) / 1e9;
                long done = Backlog.completed(engine, QUEUE);
                Sample sample = sample(db, engine, seconds, done, (done - lastDone) / (seconds - lastSeconds));
                samples.add(sample);
                System.out.println(sample.line());
                lastDone = done;
                lastSeconds = seconds;
            }
        } finally {
            running.set(false);
            producer.join(60_000);
            engine.closeLater().block(WAIT);
        }

        double seconds = samples.get(samples.size() - 1).seconds();
        long done = samples.get(samples.size() - 1).done();
        double peak = samples.stream().mapToDouble(Sample::jobsPerSecond).max().orElse(0);
        double settleWindow = settings.retentionSeconds() + 2 * settings.gcIntervalMillis() / 1000.0;
        long bound = (long) (Backlog.DEPTH + Backlog.INSERT_BATCH + CONCURRENCY + PREFETCH + 1.5 * peak * settleWindow);
        List<Sample> held = samples.stream().filter(s -> s.seconds() > settleWindow).toList();
        long rowsMax = held.stream().mapToLong(Sample::rows).max().orElse(0);
        long deadMax = samples.stream().mapToLong(s -> s.hot().deadTuples()).max().orElse(0);
        long historyDeadMax = samples.stream().mapToLong(s -> s.history().deadTuples()).max().orElse(0);
        boolean bounded = !held.isEmpty() && rowsMax <= bound;
        System.out.println(String.format(Locale.ROOT, "MAINTENANCE minutes=%.1f retention_s=%d gc_batch=%d"
                        + " gc_budget_ms=%d jobs=%d jobs_per_s=%.0f peak_jobs_per_s=%.0f rows_max=%d rows_end=%d"
                        + " hot_dead_tup_max=%d history_dead_tup_max=%d gc_deleted=%d bound=%d bounded=%s", seconds / 60,
                settings.retentionSeconds(), settings.gcBatch(), settings.gcBudgetMillis(), done, done / seconds, peak,
                rowsMax, samples.get(samples.size() - 1).rows(), deadMax, historyDeadMax,
                samples.get(samples.size() - 1).gcDeleted(), bound, bounded));
        db.close();
        System.exit(bounded ? 0 : 1);
    }

    private static Sample sample(TestDatabase db, DurableEngine engine, double seconds, long done, double rate) {
        TableSample hot = tableSample(db, "durable_instances");
        TableSample history = tableSample(db, "durable_history");
        long gcDeleted = engine.maintenance().map(m -> m.stats().collected()).orElse(0L);
        return new Sample(seconds, done, rate, hot, history, gcDeleted);
    }

    private static TableSample tableSample(TestDatabase db, String name) {
        String table = "\"" + db.schema() + "\"." + name;
        List<Long> rows = query(db, "SELECT count(*), count(*) FILTER (WHERE status IN ('done', 'failed', 'cancelled')),"
                + " pg_total_relation_size('" + table + "') FROM " + table,
                row -> List.of(row.get(0, Long.class), row.get(1, Long.class), row.get(2, Long.class)));
        List<Long> tuples = query(db, "SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables"
                        + " WHERE schemaname = '" + db.schema() + "' AND relname = '" + name + "'",
                row -> List.of(row.get(0, Long.class), row.get(1, Long.class)));
        return new TableSample(rows.get(0), rows.get(1), tuples.isEmpty() ? 0 : tuples.get(0),
                tuples.isEmpty() ? 0 : tuples.get(1), rows.get(2));
    }

    private static List<Long> query(TestDatabase db, String sql, Function<Row, List<Long>> mapper) {
        List<Long> result = Flux.usingWhen(db.connectionFactory().create(),
                        (Connection c) -> Flux.from(c.createStatement(sql).execute())
                                .flatMap(r -> r.map((row, meta) -> mapper.apply(row))),
                        Connection::close)
                .next()
                .block(WAIT);
        return result == null ? List.of() : result;
    }
}
