package dev.durable.benchmarks.shootout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.BooleanSupplier;

/**
 * One contender's turn in one round, the same for every contender:
 *
 * <ol>
 *   <li>drop its schema and vacuum; start it;
 *   <li><b>warm-up at parity</b>: passes of the throughput phase with the window's own job count
 *       (inserted in the contender's batches, run to committed): at least {@link #MIN_WARMUP_PASSES},
 *       then another while the JIT still spent more than {@link #JIT_BUSY_SHARE} of the last pass's
 *       wall time compiling and either the pass's jobs/s moved more than {@link #STEADY_SHARE} from
 *       the pass before or the JIT took more than {@link #JIT_STILL_COMPILING} of it, up to
 *       {@link #MAX_WARMUP_PASSES}; then {@link #WARMUP_SINGLES} single inserts
 *       for the single-insert path. Not measured;
 *   <li><b>idle enqueue-to-start latency</b>: single jobs one at a time, 10 to 30 ms apart, each
 *       timed from just before its insert call to its handler starting;
 *   <li>a full GC and a wait until the JIT is quiet, so the window pays for neither the previous
 *       contender's garbage nor compilation the warm-up left queued;
 *   <li><b>throughput window</b>: N jobs inserted in batches by one thread while the workers run,
 *       timed from just before the first insert until the database shows the last completion
 *       committed (handler count first, then the committed-row count polled every 5 ms), with the
 *       {@link CostMeter}'s readings at both ends;
 *   <li>stop it; drop its schema and vacuum.
 * </ol>
 */
final class Protocol {

    static final int MIN_WARMUP_PASSES = 1;
    static final int MAX_WARMUP_PASSES = 8;
    /** JIT milliseconds per wall-clock millisecond above which the warm-up runs another pass. */
    static final double JIT_BUSY_SHARE = 0.05;
    /**
     * A pass within this share of the previous pass's jobs/s ends the warm-up (more passes no longer
     * help), unless the JIT still took more than {@link #JIT_STILL_COMPILING} of it: a steady rate
     * while the compiler holds a core is not warm (Durable's windows kept 300-700 ms of JIT).
     */
    static final double STEADY_SHARE = 0.10;
    static final double JIT_STILL_COMPILING = 0.25;
    static final int WARMUP_SINGLES = 30;

    private final Target target;
    private final CostMeter meter;
    private final Shootout.Config config;
    /** The server's commit profile, as its settings make it (Target#profileLabel). */
    private final String profile;

    Protocol(Target target, CostMeter meter, Shootout.Config config) {
        this.target = target;
        this.meter = meter;
        this.config = config;
        this.profile = target.profileLabel();
    }

    Result run(Contender contender, int round) throws Exception {
        String label = contender.name() + " round " + round;
        Shootout.log("%s: %s", label, contender.settings());
        Probe.reset(config.latencyJobs());
        target.dropAndVacuum(contender.schema());
        contender.start();
        Counts counts = new Counts();
        try {
            warmUp(contender, counts, label);
            double[] millis = idleLatency(contender, counts, label);

            System.gc();
            awaitJitQuiet(label);
            long base = contender.committed(target, counts.inserted);
            int jobs = config.jobs();
            CostMeter.Window window = meter.begin();
            long start = System.nanoTime();
            counts.inserted += insertAll(contender, Probe.THROUGHPUT, jobs);
            double insertSeconds = (System.nanoTime() - start) / 1e9;
            await(label + " throughput", Duration.ofMinutes(10), () -> Probe.throughputStarted() >= jobs);
            awaitCommitted(contender, counts.inserted, base, jobs);
            double seconds = (System.nanoTime() - start) / 1e9;
            Costs costs = meter.end(window, jobs, label);
            Shootout.log("%s: inserts took %.3f s of %.3f s; latency min %.2f ms, max %.2f ms", label,
                    insertSeconds, seconds, millis[0], millis[millis.length - 1]);
            return Result.of(contender.name(), "short", profile, round, jobs, seconds,
                    percentile(millis, 50), percentile(millis, 99), costs);
        } finally {
            contender.stop();
            target.dropAndVacuum(contender.schema());
        }
    }

    /** Jobs inserted so far in this turn, across phases. */
    private static final class Counts {
        long inserted;
        long warmupSeq = Probe.WARMUP;
    }

    private void warmUp(Contender contender, Counts counts, String label) throws Exception {
        int jobs = config.warmupJobs();
        double lastJobsPerSecond = Double.NaN;
        for (int pass = 1; pass <= MAX_WARMUP_PASSES; pass++) {
            long base = contender.committed(target, counts.inserted);
            long jit = meter.jitMillis();
            long start = System.nanoTime();
            counts.inserted += insertAll(contender, counts.warmupSeq, jobs);
            counts.warmupSeq += jobs;
            long started = counts.warmupSeq - Probe.WARMUP;
            await(label + " warm-up", Duration.ofMinutes(10), () -> Probe.warmupStarted() >= started);
            awaitCommitted(contender, counts.inserted, base, jobs);
            double wallMillis = (System.nanoTime() - start) / 1e6;
            long jitMillis = meter.jitMillis() - jit;
            double jobsPerSecond = jobs / wallMillis * 1e3;
            boolean jitQuiet = jitMillis <= JIT_BUSY_SHARE * wallMillis;
            boolean steady = Math.abs(jobsPerSecond - lastJobsPerSecond) <= STEADY_SHARE * lastJobsPerSecond
                    && jitMillis <= JIT_STILL_COMPILING * wallMillis;
            boolean done = pass >= MIN_WARMUP_PASSES && (jitQuiet || steady);
            Shootout.log("%s: warm-up pass %d: %d jobs in %.0f ms (%.0f jobs/s), JIT %d ms (%.0f%% of the pass): %s",
                    label, pass, jobs, wallMillis, jobsPerSecond, jitMillis, 100 * jitMillis / wallMillis,
                    jitQuiet ? "JIT quiet, warm" : steady ? "jobs/s steady, warm"
                            : pass == MAX_WARMUP_PASSES ? "last pass allowed" : "another pass");
            if (done) {
                break;
            }
            lastJobsPerSecond = jobsPerSecond;
        }
        for (int i = 0; i < WARMUP_SINGLES; i++) {
            contender.insertOne(counts.warmupSeq++);
            counts.inserted++;
            pause();
        }
        long started = counts.warmupSeq - Probe.WARMUP;
        await(label + " warm-up singles", Duration.ofMinutes(2), () -> Probe.warmupStarted() >= started);
        awaitCommitted(contender, counts.inserted, 0, counts.inserted);
    }

    /** The idle enqueue-to-start latencies in milliseconds, sorted. */
    private double[] idleLatency(Contender contender, Counts counts, String label) throws Exception {
        int latencyJobs = config.latencyJobs();
        long[] before = new long[latencyJobs];
        for (int i = 0; i < latencyJobs; i++) {
            before[i] = System.nanoTime();
            contender.insertOne(Probe.LATENCY + i);
            counts.inserted++;
            pause();
        }
        await(label + " latency", Duration.ofMinutes(2), () -> {
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
        awaitCommitted(contender, counts.inserted, 0, counts.inserted);
        return millis;
    }

    /**
     * Waits until the JIT has compiled nothing for 300 ms (at most 10 s), so compilation queued by
     * the warm-up does not land in the window.
     */
    private void awaitJitQuiet(String label) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        long last = meter.jitMillis();
        int quiet = 0;
        while (quiet < 3 && System.nanoTime() < deadline) {
            Thread.sleep(100);
            long now = meter.jitMillis();
            quiet = now == last ? quiet + 1 : 0;
            last = now;
        }
        if (quiet < 3) {
            Shootout.log("%s: the JIT was still compiling after 10 s; measuring anyway", label);
        }
    }

    /** Inserts {@code count} jobs numbered from {@code first}, in the contender's batch size. */
    static long insertAll(Contender contender, long first, int count) throws Exception {
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

    private void awaitCommitted(Contender contender, long inserted, long base, long expected)
            throws InterruptedException {
        awaitCommitted(target, contender, inserted, base, expected);
    }

    /** Polls the committed-row count every 5 ms until it is {@code expected} more than {@code base}. */
    static void awaitCommitted(Target target, Contender contender, long inserted, long base, long expected)
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

    static void await(String what, Duration timeout, BooleanSupplier condition) throws InterruptedException {
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

    /** Nearest-rank percentile of sorted values (the rank's rounding error left out: p99.9 of 1,000 is the 999th). */
    static double percentile(double[] sorted, double p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.length - 1e-9);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }
}
