package dev.durable.benchmarks.shootout;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import reactor.core.publisher.Mono;

/**
 * Issue 31's scaling run: 1, 2 and 4 Durable engines, each in a JVM of its own
 * ({@link ScalingEngine}), on one PostgreSQL with the same total connection budget split between
 * them, at saturation. This JVM only inserts (its own small pool, outside the budget, as the
 * shootout's inserting thread is) and measures.
 *
 * <p>Each configuration: a fresh schema; the engines start; a feeder keeps {@link #BACKLOG} rows
 * in the hot table (counted in the database, as the engines run in other processes); after the
 * warm-up the steady window measures the committed rate, PostgreSQL's CPU, WAL and index writes
 * per job ({@link CostMeter}), the engines' CPU per job (their processes' CPU time) and the share of
 * it their JIT compilers took, and the picks: calls and execution time per job from
 * {@code pg_stat_statements}, and whether any pick ever waited: {@code pg_stat_activity} sampled
 * every {@link #SAMPLE_MILLIS} ms, counting active picks and those waiting on a heavyweight lock
 * ({@code Lock}: a row, tuple or transaction lock) or a lightweight one ({@code LWLock}: a buffer
 * or other shared-memory lock). The same samples of every active backend go to standard error as
 * counts of wait events, each lock wait named with the statement that waits.
 *
 * <pre>
 * benchmarks/scaling [--engines 1,2,4] [--connections 20] [--seconds 60] [--steady-seconds 45]
 *                    [--profile fast|durable]
 * </pre>
 *
 * Standard output: a SCALING line per configuration, then a RATIO line (each configuration's rate
 * over the first one's).
 */
public final class Scaling {

    static final String SCHEMA = "scaling_durable";
    static final int BACKLOG = 10_000;
    static final int INSERT_BATCH = 1_000;
    static final int SAMPLE_MILLIS = 20;
    static final int FEED_POLL_MILLIS = 50;
    private static final long NANOS_PER_TICK = TimeUnit.SECONDS.toNanos(1) / ServerCpu.clockTicksPerSecond();
    /**
     * The pick statements: every pick starts with the candidates' priorities (CandidateSql). Matched on
     * their opening, as {@code pg_stat_activity} keeps only a statement's first 1 KB.
     */
    static final String PICKS = "query LIKE '%WITH RECURSIVE priorities AS%'";

    record Config(List<Integer> engines, int connections, int seconds, int steadySeconds, Target.Profile profile) {
    }

    private Scaling() {
    }

    public static void main(String[] args) throws Exception {
        Config config = parse(args);
        Shootout.log("scaling: engines=%s connections=%d seconds=%d steady_seconds=%d profile=%s cores=%d"
                        + " concurrency=%d prefetch=%d handler_ms=%d",
                config.engines(), config.connections(), config.seconds(), config.steadySeconds(),
                config.profile().label(), Runtime.getRuntime().availableProcessors(), DurableContender.CONCURRENCY,
                DurableContender.PREFETCH, DurableContender.HANDLER_MILLIS);
        Map<Integer, Double> rates = new LinkedHashMap<>();
        try (Target target = Target.open(config.profile())) {
            CostMeter meter = CostMeter.open(target);
            for (int engines : config.engines()) {
                String line = run(target, meter, config, engines, rates);
                System.out.println(line);
                System.out.flush();
            }
        }
        StringBuilder ratio = new StringBuilder("RATIO");
        int first = config.engines().get(0);
        rates.forEach((engines, rate) -> {
            if (engines != first) {
                ratio.append(String.format(Locale.ROOT, " engines_%d/engines_%d=%.2f", engines, first,
                        rate / rates.get(first)));
            }
        });
        System.out.println(ratio);
        System.exit(0);
    }

    private static String run(Target target, CostMeter meter, Config config, int engines, Map<Integer, Double> rates)
            throws Exception {
        String label = "scaling " + engines + " engine" + (engines == 1 ? "" : "s");
        int pool = config.connections() / engines;
        target.dropAndVacuum(SCHEMA);
        // Inserts only: no maintenance of its own (the engines' vacuumers and reapers are the ones measured).
        DurableEngine inserter = DurableEngine.builder(EngineOptions.builder()
                        .url(target.r2dbcUrl).schema(SCHEMA).poolMaxSize(4).runMaintenance(false).build())
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty())
                        .queue(DurableContender.QUEUE))
                .build();
        inserter.start().block(Duration.ofMinutes(2));
        List<EngineProcess> children = new ArrayList<>();
        Feeder feeder = new Feeder(target, inserter);
        Sampler sampler = new Sampler(target);
        try {
            for (int i = 0; i < engines; i++) {
                children.add(startEngine(target, pool));
            }
            Shootout.log("%s: %d engines of %d connections each started", label, engines, pool);
            feeder.start();
            TimeUnit.SECONDS.sleep(config.seconds() - config.steadySeconds());
            CostMeter.Window window = meter.begin();
            long enginesCpu = cpuNanos(children);
            long enginesJit = compilerNanos(children);
            long start = System.nanoTime();
            long first = committed(target);
            sampler.start();
            TimeUnit.SECONDS.sleep(config.steadySeconds());
            long end = System.nanoTime();
            long last = committed(target);
            sampler.finish();
            Shootout.log("%s: wait events of every active backend, %d samples: %s", label, sampler.samples,
                    sampler.waits());
            long jobs = last - first;
            double enginesCpuMicros = (cpuNanos(children) - enginesCpu) / 1e3 / jobs;
            double enginesJitMicros = (compilerNanos(children) - enginesJit) / 1e3 / jobs;
            Costs costs = meter.end(window, jobs, label);
            target.logTables(SCHEMA, label);
            List<String[]> picks = target.queryRows("SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0)"
                    + " FROM pg_stat_statements WHERE " + PICKS);
            long pickCalls = Long.parseLong(picks.get(0)[0]);
            double pickMillis = Double.parseDouble(picks.get(0)[1]);
            double seconds = (end - start) / 1e9;
            rates.put(engines, jobs / seconds);
            if (feeder.failure != null) {
                throw new IllegalStateException("the feeder failed", feeder.failure);
            }
            return String.format(Locale.ROOT, "SCALING engines=%d connections_per_engine=%d profile=%s jobs=%d"
                            + " seconds=%.3f jobs_per_s=%.1f %s engines_cpu_us_per_job=%.1f engines_jit_us_per_job=%.1f"
                            + " pick_calls_per_job=%.4f"
                            + " pick_us_per_job=%.1f pick_ms_per_call=%.2f samples=%d pick_samples_active=%d"
                            + " pick_samples_lock_wait=%d pick_samples_lwlock_wait=%d",
                    engines, pool, target.profileLabel(), jobs, seconds, jobs / seconds, costs.columns(),
                    enginesCpuMicros, enginesJitMicros, pickCalls / (double) jobs, pickMillis * 1e3 / jobs,
                    pickMillis / Math.max(1, pickCalls), sampler.samples, sampler.active, sampler.lockWaits,
                    sampler.lwlockWaits);
        } finally {
            sampler.finish();
            feeder.finish();
            for (EngineProcess child : children) {
                child.stop(label);
            }
            inserter.closeLater().block(Duration.ofMinutes(1));
            target.dropAndVacuum(SCHEMA);
        }
    }

    /** An engine's JVM and the reader of its standard output (one reader: it may have read ahead). */
    private record EngineProcess(Process process, BufferedReader out) {

        /** Closes its standard input, logs what it prints as it closes, and waits for it (2 minutes, then kills it). */
        void stop(String label) throws IOException, InterruptedException {
            process.getOutputStream().close();
            for (String line = out.readLine(); line != null; line = out.readLine()) {
                Shootout.log("%s: engine pid %d: %s", label, process.pid(), line);
            }
            if (!process.waitFor(2, TimeUnit.MINUTES)) {
                process.destroyForcibly();
            }
        }
    }

    private static EngineProcess startEngine(Target target, int pool) throws IOException {
        Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
        // Compiler threads that live as long as the JVM, so their CPU time stays countable (compilerNanos).
        List<String> command = new ArrayList<>(List.of(java.toString(), "-Xms512m", "-Xmx1g",
                "-XX:-UseDynamicNumberOfCompilerThreads", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        command.addAll(DurableContender.Knobs.asArguments());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), ScalingEngine.class.getName(), SCHEMA,
                Integer.toString(pool)));
        ProcessBuilder builder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
        // The URL may carry a password: in the environment, not on a command line anyone can list.
        builder.environment().put(ScalingEngine.URL_ENV, target.r2dbcUrl);
        Process child = builder.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        if (!"READY".equals(line)) {
            child.destroyForcibly();
            throw new IllegalStateException("an engine did not start: " + line);
        }
        return new EngineProcess(child, out);
    }

    /** The CPU time the engines' processes have used so far. */
    private static long cpuNanos(List<EngineProcess> children) {
        long total = 0;
        for (EngineProcess child : children) {
            total += child.process().info().totalCpuDuration().map(Duration::toNanos).orElseThrow(
                    () -> new IllegalStateException("this platform does not report a process's CPU time"));
        }
        return total;
    }

    /**
     * The CPU time the engines' JIT compiler threads have used so far (Linux: their threads in
     * {@code /proc}; 0 elsewhere): each engine's JVM compiles the same code, so the more engines, the
     * more of a window they spend compiling at the same rate of jobs. The engines keep their compiler
     * threads ({@link #startEngine}), so a thread's time never leaves the sum with it.
     */
    private static long compilerNanos(List<EngineProcess> children) {
        long ticks = 0;
        for (EngineProcess child : children) {
            Path tasks = Paths.get("/proc", Long.toString(child.process().pid()), "task");
            try (Stream<Path> threads = Files.list(tasks)) {
                for (Path thread : threads.toList()) {
                    try {
                        if (Files.readString(thread.resolve("comm")).contains("CompilerThre")) {
                            ticks += ServerCpu.cpuTicks(Files.readString(thread.resolve("stat")));
                        }
                    } catch (IOException | RuntimeException e) {
                        // The thread ended between the listing and the read.
                    }
                }
            } catch (IOException | RuntimeException e) {
                // No /proc here, or the engine has ended: its threads count for nothing.
            }
        }
        return ticks * NANOS_PER_TICK;
    }

    private static long committed(Target target) {
        return target.queryLong("SELECT count(*) FROM " + SCHEMA + ".durable_history WHERE status = 'done'");
    }

    /** Keeps {@link #BACKLOG} rows in the hot table, counted there (bounded: it reads at most that many). */
    private static final class Feeder extends Thread {

        private final Target target;
        private final DurableEngine inserter;
        private volatile boolean running = true;
        private long seq;
        volatile Throwable failure;

        Feeder(Target target, DurableEngine inserter) {
            super("scaling-feeder");
            setDaemon(true);
            this.target = target;
            this.inserter = inserter;
        }

        @Override
        public void run() {
            try {
                while (running) {
                    long backlog = target.queryLong("SELECT count(*) FROM (SELECT 1 FROM " + SCHEMA
                            + ".durable_instances LIMIT " + BACKLOG + ") b");
                    if (backlog >= BACKLOG - INSERT_BATCH) {
                        // A count reads up to BACKLOG rows: not so often that it competes with the picks.
                        TimeUnit.MILLISECONDS.sleep(FEED_POLL_MILLIS);
                        continue;
                    }
                    for (long n = backlog; n < BACKLOG; n += INSERT_BATCH) {
                        List<JobRequest> requests = new ArrayList<>(INSERT_BATCH);
                        for (int i = 0; i < INSERT_BATCH; i++) {
                            requests.add(JobRequest.of("noop", seq++));
                        }
                        inserter.insertAll(requests).block(Duration.ofMinutes(1));
                    }
                }
            } catch (Throwable e) {
                failure = e;
            }
        }

        void finish() throws InterruptedException {
            running = false;
            join(TimeUnit.MINUTES.toMillis(2));
        }
    }

    /**
     * Samples the picks' wait events while the window runs, and those of every active backend (for the
     * log: which locks the engines' statements wait on, and which statement waits).
     */
    private static final class Sampler extends Thread {

        private final Target target;
        private volatile boolean running = true;
        volatile long samples;
        volatile long active;
        volatile long lockWaits;
        volatile long lwlockWaits;
        private final Map<String, Long> waits = new ConcurrentHashMap<>();

        Sampler(Target target) {
            super("scaling-sampler");
            setDaemon(true);
            this.target = target;
        }

        @Override
        public void run() {
            while (running) {
                // One look at the active backends a sample, so the sampler costs the measured server one
                // query: each group is whether it is a pick, its wait type, and its wait event (a lock wait
                // named with the opening of the statement that waits: which one waits is the point).
                List<String[]> groups = target.queryRows("SELECT " + PICKS + ", coalesce(wait_event_type, ''),"
                        + " coalesce(wait_event_type || ':' || wait_event, 'CPU')"
                        + " || CASE WHEN wait_event_type IN ('Lock', 'LWLock')"
                        + " THEN ' (' || left(regexp_replace(query, '\\s+', ' ', 'g'), 40) || ')' ELSE '' END,"
                        + " count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()"
                        + " AND backend_type = 'client backend' GROUP BY 1, 2, 3");
                samples++;
                for (String[] group : groups) {
                    long backends = Long.parseLong(group[3]);
                    if ("true".equals(group[0])) {
                        active += backends;
                        lockWaits += "Lock".equals(group[1]) ? backends : 0;
                        lwlockWaits += "LWLock".equals(group[1]) ? backends : 0;
                    }
                    waits.merge(group[2], backends, Long::sum);
                }
                try {
                    TimeUnit.MILLISECONDS.sleep(SAMPLE_MILLIS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        /** The wait events sampled, most frequent first ("CPU": active, waiting on nothing). */
        String waits() {
            return waits.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue().reversed())
                    .map(wait -> wait.getKey() + " " + wait.getValue())
                    .collect(Collectors.joining(", "));
        }

        void finish() throws InterruptedException {
            running = false;
            if (isAlive()) {
                join(TimeUnit.MINUTES.toMillis(1));
            }
        }
    }

    static Config parse(String[] args) {
        List<Integer> engines = List.of(1, 2, 4);
        int connections = Shootout.DEFAULT_CONNECTIONS;
        int seconds = Shootout.DEFAULT_SECONDS;
        int steadySeconds = Shootout.DEFAULT_STEADY_SECONDS;
        Target.Profile profile = Target.Profile.FAST;
        for (int i = 0; i < args.length; i += 2) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            if (value == null) {
                throw new IllegalArgumentException(args[i] + " needs a value");
            }
            switch (args[i]) {
                case "--engines" -> {
                    List<Integer> parsed = new ArrayList<>();
                    for (String part : value.split(",")) {
                        parsed.add(Shootout.positive(args[i], part.trim()));
                    }
                    engines = List.copyOf(parsed);
                }
                case "--connections" -> connections = Shootout.positive(args[i], value);
                case "--seconds" -> seconds = Shootout.positive(args[i], value);
                case "--steady-seconds" -> steadySeconds = Shootout.positive(args[i], value);
                case "--profile" -> profile = Target.Profile.parse(value);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        for (int n : engines) {
            // Each engine needs its queue's pick, the commit lanes and one more (EngineOptions.poolMaxSize).
            if (n < 1 || connections / n < 2 + DurableContender.COMMIT_PARALLELISM) {
                throw new IllegalArgumentException(n + " engines cannot share " + connections
                        + " connections: each needs " + (2 + DurableContender.COMMIT_PARALLELISM));
            }
        }
        if (steadySeconds >= seconds) {
            throw new IllegalArgumentException("--steady-seconds must be less than --seconds");
        }
        return new Config(engines, connections, seconds, steadySeconds, profile);
    }
}
