package dev.durable.benchmarks.heap;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.QueueOptions;
import dev.durable.QueueStats;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 16's heap benchmark: the engine holds only what its concurrency and prefetch admit, so its
 * heap does not grow with the number of queued jobs. For each backlog size, on a fresh schema, the
 * jobs are inserted with one SQL statement (none of them passes through this JVM), then one engine
 * (concurrency 64, prefetch 64) works the queue for a fixed time, or until nine tenths of the backlog
 * is done, with a handler that holds each job for 50 ms, so the slots and the buffer stay full. Every second the benchmark forces a full
 * collection and reads the heap in use after it: what is live, not what is merely allocated. A HEAP
 * line per backlog gives the median and highest live heap and the jobs done; the HEAPBOUND line
 * compares the largest backlog's highest live heap with the smallest's. The engines run in turn in
 * the same JVM, the smallest backlog first, after a warm-up run on a backlog of its own so the JIT's
 * code and the driver's caches are in every measured run alike.
 *
 * <pre>benchmarks/heap-bound [--backlogs 10000,100000,1000000] [--seconds 20]</pre>
 */
public final class HeapBound {

    private static final String QUEUE = "load";
    private static final int CONCURRENCY = 64;
    private static final int PREFETCH = 64;
    private static final Duration WAIT = Duration.ofMinutes(5);
    private static final Duration HOLD = Duration.ofMillis(50);

    private record Run(int backlog, long medianBytes, long maxBytes, long done) {

        String line() {
            return String.format(Locale.ROOT, "HEAP backlog=%d live_heap_median_mb=%.1f live_heap_max_mb=%.1f"
                    + " jobs_done=%d", backlog, medianBytes / 1048576.0, maxBytes / 1048576.0, done);
        }
    }

    private HeapBound() {
    }

    public static void main(String[] args) {
        List<Integer> backlogs = List.of(10_000, 100_000, 1_000_000);
        int seconds = 20;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--backlogs" -> backlogs = java.util.Arrays.stream(args[i + 1].split(","))
                        .map(String::trim).map(Integer::parseInt).sorted().toList();
                case "--seconds" -> seconds = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        run("warmup", backlogs.get(0), Math.max(5, seconds / 2));
        List<Run> runs = new ArrayList<>();
        for (int backlog : backlogs) {
            Run run = run("backlog_" + backlog, backlog, seconds);
            runs.add(run);
            System.out.println(run.line());
        }
        Run smallest = runs.get(0);
        Run largest = runs.get(runs.size() - 1);
        System.out.println(String.format(Locale.ROOT, "HEAPBOUND backlogs=%d..%d live_heap_max_mb=%.1f/%.1f (%.2fx)",
                smallest.backlog, largest.backlog, largest.maxBytes / 1048576.0, smallest.maxBytes / 1048576.0,
                (double) largest.maxBytes / smallest.maxBytes));
        System.exit(0);
    }

    private static Run run(String name, int backlog, int seconds) {
        TestDatabase db = TestPostgres.newDatabase("heap_" + name);
        EngineOptions options = EngineOptions.builder().url(db.url()).schema(db.schema()).poolMaxSize(8)
                .handlerScheduler(Schedulers.parallel())
                .queue(QueueOptions.builder(QUEUE).concurrency(CONCURRENCY).prefetch(PREFETCH).minDemand(32).build())
                .build();
        DurableEngine engine = DurableEngine.builder(options)
                .register(JobDefinition.of("noop", Long.class,
                        (Long seq) -> Mono.delay(HOLD).then()).queue(QUEUE))
                .build();
        engine.migrate().block(WAIT);
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_instances (type, queue, step, state, max_attempts)"
                + " SELECT 'noop', '" + QUEUE + "', 'run', to_jsonb(g), 5 FROM generate_series(1, " + backlog + ") g");
        db.execute("VACUUM ANALYZE \"" + db.schema() + "\".durable_instances");
        System.err.println("[heap-bound] " + name + ": " + backlog + " queued, " + seconds + " s");
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        List<Long> live = new ArrayList<>();
        engine.start().block(WAIT);
        try {
            long end = System.nanoTime() + seconds * 1_000_000_000L;
            while (System.nanoTime() < end && completed(engine) < backlog * 9L / 10) {
                sleep(1000);
                System.gc();
                live.add(memory.getHeapMemoryUsage().getUsed());
            }
        } finally {
            engine.closeLater().block(WAIT);
        }
        long done = completed(engine);
        db.close();
        List<Long> sorted = live.stream().sorted().toList();
        return new Run(backlog, sorted.get(sorted.size() / 2), sorted.get(sorted.size() - 1), done);
    }

    private static long completed(DurableEngine engine) {
        return engine.queueStats(QUEUE).map(QueueStats::completed).orElse(0L);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
