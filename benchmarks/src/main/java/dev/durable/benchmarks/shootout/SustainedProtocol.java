package dev.durable.benchmarks.shootout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntToLongFunction;

/**
 * One contender's turn in sustained mode, as production runs it: no fixed job count but a fixed
 * time at saturation, then open-loop arrivals below it.
 *
 * <ol>
 *   <li>drop its schema and vacuum; start it;
 *   <li><b>saturation</b>: a feeder thread inserts batches (the contender's own size) whenever
 *       fewer than {@link #BACKLOG} inserted jobs have not started, so the workers never run dry
 *       and the table holds a standing backlog, for {@code --seconds} (default 60). The first
 *       {@code seconds - steady} are warm-up; the <b>steady window</b> is the last
 *       {@code --steady-seconds} (default 45): its rate is the committed rows it added (counted in
 *       the database at both ends) over its length, with the {@link CostMeter}'s per-job costs
 *       (the feeder's inserts included, as in production);
 *   <li>the backlog drains;
 *   <li>an unmeasured load phase of {@link #LOAD_WARMUP_SECONDS} s at the lowest share, so the
 *       load path (small batches, settles watched) is compiled before it is measured;
 *   <li><b>latency under load</b>, once per {@code --load-shares} (default 50 % and 80 %) of the
 *       rate just measured: jobs arrive on a fixed schedule for {@code --load-seconds} (default
 *       20), open loop: every {@link #TICK_MILLIS} ms a pacer hands what has come due, as one
 *       batch, to one of {@link #INSERTERS} threads, so a slow insert never holds back the
 *       arrivals behind it (as a service's request threads, each inserting its own jobs, would
 *       not wait for each other); every latency is timed from the job's scheduled arrival, so
 *       the tick and a late insert count against the system (no coordinated omission). Enqueue-to-start is the handler's first line;
 *       enqueue-to-settle is when the contender sees the outcome committed
 *       ({@link Contender#settleSource}), n/a where it cannot tell;
 *   <li>stop it; drop its schema and vacuum.
 * </ol>
 */
final class SustainedProtocol {

    /** Inserted jobs not yet started above which the feeder waits. */
    static final int BACKLOG = 10_000;
    /** Threads that insert a load phase's arrivals. */
    static final int INSERTERS = 4;
    /**
     * How often the load phase's pacer hands arrivals to the inserters. Per-arrival inserts would
     * measure the insert path instead of the queue (on 2 cores 20,000 single-row transactions a
     * second take most of the machine for every system); 2 ms adds at most 2 ms to a latency.
     */
    static final int TICK_MILLIS = 2;
    /** The unmeasured load phase before the measured ones, at the lowest share. */
    static final int LOAD_WARMUP_SECONDS = 10;

    private final Target target;
    private final CostMeter meter;
    private final Shootout.Config config;
    /** The server's commit profile, as its settings make it (Target#profileLabel). */
    private final String profile;

    SustainedProtocol(Target target, CostMeter meter, Shootout.Config config) {
        this.target = target;
        this.meter = meter;
        this.config = config;
        this.profile = target.profileLabel();
    }

    /** One load phase's figures, printed as a LOAD line. */
    record Load(String name, String profile, double share, double rate, int jobs, double[] startMillis,
            double[] settleMillis, double[] insertMillis) {

        String line() {
            return String.format(Locale.ROOT, "LOAD name=%s profile=%s share=%.2f rate=%.0f jobs=%d"
                            + " start_p50_ms=%s start_p99_ms=%s start_p999_ms=%s settle_p50_ms=%s settle_p99_ms=%s"
                            + " settle_p999_ms=%s settled=%d insert_p99_ms=%s",
                    name, profile, share, rate, jobs, p(startMillis, 50), p(startMillis, 99), p(startMillis, 99.9),
                    p(settleMillis, 50), p(settleMillis, 99), p(settleMillis, 99.9), settleMillis.length,
                    p(insertMillis, 99));
        }

        private static String p(double[] sorted, double percentile) {
            return sorted.length == 0 ? "n/a" : Costs.format(Protocol.percentile(sorted, percentile), "%.2f");
        }
    }

    /** The steady window's RESULT and the LOAD lines of the phases after it. */
    record Outcome(Result saturation, List<Load> loads) {
    }

    Outcome run(Contender contender, int round) throws Exception {
        String label = contender.name() + " sustained round " + round;
        Shootout.log("%s: %s; settles seen by %s", label, contender.settings(),
                contender.settleSource() == null ? "nothing (n/a)" : contender.settleSource());
        Probe.reset(0);
        target.dropAndVacuum(contender.schema());
        contender.start();
        try {
            Feeder feeder = new Feeder(contender);
            feeder.start();
            Result saturation;
            try {
                saturation = saturate(contender, feeder, label, round);
            } finally {
                feeder.finish();
            }
            long inserted = feeder.inserted;
            Protocol.await(label + " drain", Duration.ofMinutes(10), () -> Probe.throughputStarted() >= inserted);
            Protocol.awaitCommitted(target, contender, inserted, 0, inserted);
            List<Load> loads = new ArrayList<>();
            long total = inserted;
            // The saturated phase compiled the bulk path; the load path (small batches, settles
            // watched) is compiled here, unmeasured, at the lowest share, not in the first phase.
            double lowest = config.loadShares().stream().mapToDouble(Double::doubleValue).min().orElseThrow();
            contender.watchSettles();
            total += load(contender, lowest, lowest * saturation.jobsPerSecond(), total,
                    Math.min(LOAD_WARMUP_SECONDS, config.loadSeconds()), label + " warm-up").jobs();
            for (double share : config.loadShares()) {
                contender.watchSettles();
                Load load = load(contender, share, share * saturation.jobsPerSecond(), total, config.loadSeconds(),
                        label);
                total += load.jobs();
                loads.add(load);
            }
            return new Outcome(saturation, loads);
        } finally {
            contender.stop();
            target.dropAndVacuum(contender.schema());
        }
    }

    private Result saturate(Contender contender, Feeder feeder, String label, int round) throws Exception {
        long warmNanos = TimeUnit.SECONDS.toNanos(config.seconds() - config.steadySeconds());
        long steadyNanos = TimeUnit.SECONDS.toNanos(config.steadySeconds());
        sleepUntil(System.nanoTime() + warmNanos, feeder);
        Monitor monitor = new Monitor(label + " saturated", contender);
        Shootout.log("%s: steady window starts, %d s", label, config.steadySeconds());
        CostMeter.Window window = meter.begin();
        long start = System.nanoTime();
        long first = contender.committed(target, feeder.inserted);
        monitor.start();
        try {
            sleepUntil(start + steadyNanos, feeder);
        } finally {
            monitor.finish();
        }
        long end = System.nanoTime();
        long last = contender.committed(target, feeder.inserted);
        long jobs = last - first;
        Costs costs = meter.end(window, jobs, label);
        target.logTables(contender.schema(), label);
        double seconds = (end - start) / 1e9;
        Shootout.log("%s: steady window %.1f s: %d jobs committed (%.0f jobs/s), %d inserted over the run", label,
                seconds, jobs, jobs / seconds, feeder.inserted);
        return Result.of(contender.name(), "sustained", profile, round, jobs, seconds, Double.NaN,
                Double.NaN, costs);
    }

    private static void sleepUntil(long deadline, Feeder feeder) throws InterruptedException {
        for (long left = deadline - System.nanoTime(); left > 0; left = deadline - System.nanoTime()) {
            if (feeder.failure != null) {
                throw new IllegalStateException("the feeder failed", feeder.failure);
            }
            TimeUnit.NANOSECONDS.sleep(Math.min(left, TimeUnit.MILLISECONDS.toNanos(100)));
        }
    }

    /** Keeps {@link #BACKLOG} jobs waiting: inserts a batch whenever fewer have not started. */
    private static final class Feeder extends Thread {

        private final Contender contender;
        private volatile boolean running = true;
        volatile long inserted;
        volatile Throwable failure;

        Feeder(Contender contender) {
            super("shootout-feeder");
            setDaemon(true);
            this.contender = contender;
        }

        @Override
        public void run() {
            try {
                while (running) {
                    if (inserted - Probe.throughputStarted() >= BACKLOG) {
                        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
                        continue;
                    }
                    int batch = contender.insertBatchSize();
                    inserted += Protocol.insertAll(contender, Probe.THROUGHPUT + inserted, batch);
                }
            } catch (Throwable e) {
                failure = e;
            }
        }

        /** Stops it; fails if it failed or did not stop (an insert hung). */
        void finish() throws InterruptedException {
            running = false;
            join(TimeUnit.MINUTES.toMillis(2));
            if (isAlive()) {
                throw new IllegalStateException("the feeder did not stop within 2 minutes");
            }
            if (failure != null) {
                throw new IllegalStateException("the feeder failed", failure);
            }
        }
    }

    /** One open-loop phase at {@code rate} jobs/s; {@code inserted} jobs came before it. */
    private Load load(Contender contender, double share, double rate, long inserted, int seconds, String label)
            throws Exception {
        int jobs = (int) Math.max(1, Math.round(rate * seconds));
        Probe.resetLoad(jobs);
        long[] arrivals = new long[jobs];
        long origin = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50);
        for (int i = 0; i < jobs; i++) {
            arrivals[i] = origin + (long) (i * 1e9 / rate);
        }
        double[] insertMillis = new double[jobs];
        int batchSize = contender.insertBatchSize();
        List<Future<?>> batches = new ArrayList<>();
        ExecutorService inserters = Executors.newFixedThreadPool(INSERTERS);
        Monitor monitor = new Monitor(label + String.format(Locale.ROOT, " load %.0f%%", share * 100), contender);
        meter.resetStatements();
        monitor.start();
        try {
            long tick = TimeUnit.MILLISECONDS.toNanos(TICK_MILLIS);
            int sent = 0;
            for (long now = origin; sent < jobs; now += tick) {
                LockSupport.parkNanos(now - System.nanoTime());
                long due = System.nanoTime();
                while (sent < jobs && arrivals[sent] <= due) {
                    int from = sent;
                    while (sent < jobs && arrivals[sent] <= due && sent - from < batchSize) {
                        sent++;
                    }
                    int to = sent;
                    batches.add(inserters.submit(() -> insert(contender, arrivals, from, to, insertMillis)));
                }
            }
            for (Future<?> batch : batches) {
                batch.get(5, TimeUnit.MINUTES);
            }
        } finally {
            inserters.shutdownNow();
            monitor.finish();
        }
        String phase = String.format(Locale.ROOT, "%s load %.0f%%", label, share * 100);
        Protocol.await(phase + " starts", Duration.ofMinutes(5), () -> allSet(jobs, Probe::loadStart));
        Protocol.awaitCommitted(target, contender, inserted + jobs, 0, inserted + jobs);
        double[] settleMillis = new double[0];
        if (contender.settleSource() != null) {
            // Every outcome is committed by now; a contender may see the last ones a moment later.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            contender.reportSettles();
            while (!allSet(jobs, Probe::loadSettle) && System.nanoTime() < deadline) {
                Thread.sleep(50);
                contender.reportSettles();
            }
            settleMillis = since(arrivals, Probe::loadSettle);
            if (settleMillis.length < jobs) {
                Shootout.log("%s: %d of %d settles seen; the percentiles are over those", phase, settleMillis.length,
                        jobs);
            }
        }
        logBySecond(phase, arrivals, origin);
        meter.logStatements(jobs, phase);
        double[] startMillis = since(arrivals, Probe::loadStart);
        Arrays.sort(insertMillis);
        Shootout.log("%s: %d arrivals at %.0f/s in %d batches", phase, jobs, rate, batches.size());
        return new Load(contender.name(), profile, share, rate, jobs, startMillis, settleMillis,
                insertMillis);
    }

    /**
     * Logs, once a second while a load phase inserts or the steady window saturates, what might stall
     * it: this JVM's CPU, GC and JIT time, the server's CPU, the VACUUMs and autovacuum workers running
     * (and on what), and what the contender's workers did ({@link Contender#activity}). Read beside the
     * phase's enqueue-to-start by second of arrival; at saturation, whether the cores or the system's
     * own loop set the rate (one query a second, beside the window's millions of jobs).
     */
    private final class Monitor extends Thread {

        private final String phase;
        private final Contender contender;
        private volatile boolean running = true;

        Monitor(String phase, Contender contender) {
            super("shootout-monitor");
            setDaemon(true);
            this.phase = phase;
            this.contender = contender;
        }

        @Override
        public void run() {
            long cpu = meter.processCpuNanos();
            long gc = meter.collectorMillis();
            long jit = meter.jitMillis();
            long pg = meter.serverCpuNanos();
            for (int second = 0; running; second++) {
                try {
                    Thread.sleep(1_000);
                } catch (InterruptedException e) {
                    return;
                }
                long cpuNow = meter.processCpuNanos();
                long gcNow = meter.collectorMillis();
                long jitNow = meter.jitMillis();
                long pgNow = meter.serverCpuNanos();
                List<String> vacuums = target.queryStrings("SELECT coalesce(string_agg(CASE WHEN backend_type ="
                        + " 'autovacuum worker' THEN 'auto ' ELSE '' END || left(query, 80), '; '), '')"
                        + " FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active'"
                        + " AND (backend_type = 'autovacuum worker' OR query ILIKE 'VACUUM%')");
                Shootout.log("%s: second %d: JVM CPU %d ms, GC %d ms, JIT %d ms; server CPU %s ms; vacuums [%s]; %s",
                        phase, second, (cpuNow - cpu) / 1_000_000, gcNow - gc, jitNow - jit,
                        pg < 0 ? "n/a" : Long.toString((pgNow - pg) / 1_000_000), vacuums.get(0),
                        contender.activity());
                cpu = cpuNow;
                gc = gcNow;
                jit = jitNow;
                pg = pgNow;
            }
        }

        void finish() throws InterruptedException {
            running = false;
            interrupt();
            join(TimeUnit.SECONDS.toMillis(10));
        }
    }

    /**
     * The enqueue-to-start p50, p99 and max of each second of arrivals, on one line: whether a tail
     * is spread over the phase or made by a few stalls (a vacuum, a GC, a checkpoint).
     */
    private static void logBySecond(String phase, long[] arrivals, long origin) {
        StringBuilder seconds = new StringBuilder();
        int from = 0;
        for (int second = 0; from < arrivals.length; second++) {
            long end = origin + TimeUnit.SECONDS.toNanos(second + 1);
            int to = from;
            while (to < arrivals.length && arrivals[to] < end) {
                to++;
            }
            int first = from;
            double[] millis = since(Arrays.copyOfRange(arrivals, from, to), i -> Probe.loadStart(first + i));
            from = to;
            if (millis.length == 0) {
                continue;
            }
            seconds.append(String.format(Locale.ROOT, " %d:%s/%s/%s", second,
                    Costs.format(Protocol.percentile(millis, 50), "%.0f"),
                    Costs.format(Protocol.percentile(millis, 99), "%.0f"),
                    Costs.format(millis[millis.length - 1], "%.0f")));
        }
        Shootout.log("%s: enqueue-to-start ms by second of arrival (p50/p99/max):%s", phase, seconds);
    }

    /** Inserts arrivals {@code from} to {@code to} as one batch; notes when each insert returned. */
    private static Void insert(Contender contender, long[] arrivals, int from, int to, double[] insertMillis)
            throws Exception {
        List<Long> seqs = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
            seqs.add(Probe.LOAD + i);
        }
        contender.insertBatch(seqs);
        long done = System.nanoTime();
        for (int i = from; i < to; i++) {
            insertMillis[i] = (done - arrivals[i]) / 1e6;
        }
        return null;
    }

    private static boolean allSet(int jobs, IntToLongFunction times) {
        for (int i = jobs - 1; i >= 0; i--) {
            if (times.applyAsLong(i) == 0) {
                return false;
            }
        }
        return true;
    }

    /** Each recorded job's time from its scheduled arrival, in milliseconds, sorted; unrecorded ones left out. */
    private static double[] since(long[] arrivals, IntToLongFunction times) {
        double[] millis = new double[arrivals.length];
        int n = 0;
        for (int i = 0; i < arrivals.length; i++) {
            long time = times.applyAsLong(i);
            if (time != 0) {
                millis[n++] = (time - arrivals[i]) / 1e6;
            }
        }
        millis = Arrays.copyOf(millis, n);
        Arrays.sort(millis);
        return millis;
    }
}
