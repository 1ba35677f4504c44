package dev.durable.benchmarks.shootout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.BooleanSupplier;

/**
 * The side-by-side harness of issue 9: raw_sql (the ceiling), durable, db_scheduler and jobrunr in
 * turn, against one PostgreSQL, with the same job count, the same no-op handler and the same
 * connection budget. Standard output carries only the RESULT lines and the RATIO line; progress
 * goes to standard error.
 *
 * <p>Per system: drop its schema and vacuum; start it; warm up (a batch plus a few single jobs,
 * not measured); the <b>idle latency</b> phase, single jobs inserted one at a time with 10 to 30 ms
 * between them, each timed from just before its insert call to its handler starting; then the
 * <b>throughput</b> phase, N jobs inserted in batches by one inserting thread while the workers
 * run, timed from just before the first insert to the moment the database shows the last
 * completion committed (handler count first, then the committed-row count polled every 5 ms);
 * stop it; drop its schema and vacuum.
 *
 * <pre>
 * benchmarks/shootout [--jobs N] [--latency-jobs M] [--connections B] [--systems raw_sql,durable,...]
 * </pre>
 */
public final class Shootout {

    static final int DEFAULT_JOBS = 20_000;
    static final int DEFAULT_LATENCY_JOBS = 300;
    static final int DEFAULT_CONNECTIONS = 20;
    static final int WARMUP_BATCH = 2_000;
    static final int WARMUP_SINGLES = 30;
    static final List<String> ALL = List.of("raw_sql", "durable", "db_scheduler", "jobrunr");

    record Config(int jobs, int latencyJobs, int connections, List<String> systems) {
    }

    private Shootout() {
    }

    public static void main(String[] args) throws Exception {
        Config config = parse(args);
        log("shootout: jobs=%d latency_jobs=%d connections=%d systems=%s cores=%d", config.jobs(),
                config.latencyJobs(), config.connections(), config.systems(),
                Runtime.getRuntime().availableProcessors());
        Map<String, Result> results = new LinkedHashMap<>();
        try (Target target = new Target()) {
            log("postgres: %s; fsync=%s synchronous_commit=%s shared_buffers=%s max_connections=%s",
                    target.queryStrings("SELECT version()").get(0),
                    target.queryStrings("SHOW fsync").get(0),
                    target.queryStrings("SHOW synchronous_commit").get(0),
                    target.queryStrings("SHOW shared_buffers").get(0),
                    target.queryStrings("SHOW max_connections").get(0));
            for (String system : config.systems()) {
                Contender contender = create(system, target, config);
                Result result = measure(contender, target, config);
                results.put(system, result);
                System.out.println(result.line());
                System.out.flush();
            }
        }
        System.out.println(String.format(Locale.ROOT, "RATIO durable/raw_sql=%s durable/db_scheduler=%s durable/jobrunr=%s",
                ratio(results, "raw_sql"), ratio(results, "db_scheduler"), ratio(results, "jobrunr")));
        System.out.flush();
        // Peers leave non-daemon threads behind (JobRunr's, Hikari's housekeepers): end here.
        System.exit(0);
    }

    static Contender create(String system, Target target, Config config) {
        return switch (system) {
            case "raw_sql" -> new RawSqlContender(target, config.connections());
            case "durable" -> new DurableContender(target, config.connections());
            case "db_scheduler" -> new DbSchedulerContender(target, config.connections());
            case "jobrunr" -> new JobRunrContender(target, config.connections());
            default -> throw new IllegalArgumentException("unknown system " + system + "; known: " + ALL);
        };
    }

    static Result measure(Contender contender, Target target, Config config) throws Exception {
        log("%s: %s", contender.name(), contender.settings());
        Probe.reset(config.latencyJobs());
        target.dropAndVacuum(contender.schema());
        contender.start();
        long inserted = 0;
        try {
            // Warm-up: the JIT, the pools and the peers' caches; not measured.
            inserted += insertAll(contender, Probe.WARMUP, WARMUP_BATCH);
            for (int i = 0; i < WARMUP_SINGLES; i++) {
                contender.insertOne(Probe.WARMUP + WARMUP_BATCH + i);
                inserted++;
                pause();
            }
            long warmed = inserted;
            await(contender.name() + " warm-up", Duration.ofSeconds(120), () -> Probe.warmupStarted() >= warmed);
            awaitCommitted(contender, target, inserted, 0, inserted);

            // Idle enqueue-to-start latency: single jobs, one at a time, the system otherwise idle.
            int latencyJobs = config.latencyJobs();
            long[] before = new long[latencyJobs];
            for (int i = 0; i < latencyJobs; i++) {
                before[i] = System.nanoTime();
                contender.insertOne(Probe.LATENCY + i);
                inserted++;
                pause();
            }
            await(contender.name() + " latency", Duration.ofSeconds(120), () -> {
                for (int i = 0; i < latencyJobs; i++) {
                    if (Probe.latencyStart(i) == 0) {
                        return false;
                    }
                }
                return true;
            });
            double[] millis = new double[latencyJobs];
            for (int i = 0; i < latencyJobs; i++) {
                millis[i] = (Probe.latencyStart(i) - before[i]) / 1e6;
            }
            Arrays.sort(millis);
            awaitCommitted(contender, target, inserted, 0, inserted);
            long base = contender.committed(target, inserted);

            // Throughput: first insert to last committed completion, inserts included.
            int jobs = config.jobs();
            long start = System.nanoTime();
            inserted += insertAll(contender, Probe.THROUGHPUT, jobs);
            double insertSeconds = (System.nanoTime() - start) / 1e9;
            await(contender.name() + " throughput", Duration.ofMinutes(10), () -> Probe.throughputStarted() >= jobs);
            awaitCommitted(contender, target, inserted, base, jobs);
            double seconds = (System.nanoTime() - start) / 1e9;
            log("%s: inserts took %.3f s of %.3f s; latency min %.2f ms, max %.2f ms", contender.name(),
                    insertSeconds, seconds, millis[0], millis[latencyJobs - 1]);
            return new Result(contender.name(), jobs, seconds, percentile(millis, 50), percentile(millis, 99));
        } finally {
            contender.stop();
            target.dropAndVacuum(contender.schema());
        }
    }

    /** Inserts {@code count} jobs numbered from {@code first}, in the contender's batch size. */
    private static long insertAll(Contender contender, long first, int count) throws Exception {
        int batchSize = contender.insertBatchSize();
        for (int offset = 0; offset < count; offset += batchSize) {
            int n = Math.min(batchSize, count - offset);
            List<Long> seqs = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                seqs.add(first + offset + i);
            }
            contender.insertBatch(seqs);
        }
        return count;
    }

    /** Polls the committed-row count every 5 ms until {@code expected} more than {@code base}. */
    private static void awaitCommitted(Contender contender, Target target, long inserted, long base, long expected)
            throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofMinutes(5).toNanos();
        while (contender.committed(target, inserted) - base < expected) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(contender.name() + ": only " + (contender.committed(target, inserted) - base)
                        + " of " + expected + " completions committed after 5 minutes");
            }
            Thread.sleep(5);
        }
    }

    private static void await(String what, Duration timeout, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(what + ": not done after " + timeout);
            }
            Thread.sleep(1);
        }
    }

    /** 10 to 30 ms between single jobs, jittered so no poll period aliases with the arrivals. */
    private static void pause() throws InterruptedException {
        Thread.sleep(ThreadLocalRandom.current().nextInt(10, 31));
    }

    /** Nearest-rank percentile of sorted values. */
    static double percentile(double[] sorted, double p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    private static String ratio(Map<String, Result> results, String peer) {
        Result durable = results.get("durable");
        Result other = results.get(peer);
        if (durable == null || other == null) {
            return "NaN";
        }
        return String.format(Locale.ROOT, "%.2f", durable.jobsPerSecond() / other.jobsPerSecond());
    }

    static Config parse(String[] args) {
        int jobs = DEFAULT_JOBS;
        int latencyJobs = DEFAULT_LATENCY_JOBS;
        int connections = DEFAULT_CONNECTIONS;
        List<String> systems = ALL;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (arg) {
                case "--jobs" -> jobs = positive(arg, value);
                case "--latency-jobs" -> latencyJobs = positive(arg, value);
                case "--connections" -> connections = positive(arg, value);
                case "--systems" -> systems = List.of(require(arg, value).split(","));
                case "-h", "--help" -> {
                    System.err.println("usage: shootout [--jobs N] [--latency-jobs M] [--connections B]"
                            + " [--systems " + String.join(",", ALL) + "]");
                    System.exit(0);
                }
                default -> throw new IllegalArgumentException("unknown argument " + arg);
            }
            i++;
        }
        for (String system : systems) {
            if (!ALL.contains(system)) {
                throw new IllegalArgumentException("unknown system " + system + "; known: " + ALL);
            }
        }
        if (connections < 4) {
            throw new IllegalArgumentException("--connections must be at least 4, was " + connections);
        }
        return new Config(jobs, latencyJobs, connections, systems);
    }

    private static String require(String option, String value) {
        if (value == null) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return value;
    }

    private static int positive(String option, String value) {
        int n;
        try {
            n = Integer.parseInt(require(option, value));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(option + " must be a positive integer, was " + value);
        }
        if (n < 1) {
            throw new IllegalArgumentException(option + " must be a positive integer, was " + value);
        }
        return n;
    }

    static void log(String format, Object... args) {
        System.err.println("[shootout] " + String.format(Locale.ROOT, format, args));
        System.err.flush();
    }
}
