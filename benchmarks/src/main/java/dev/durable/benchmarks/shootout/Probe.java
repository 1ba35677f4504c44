package dev.durable.benchmarks.shootout;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * What every contender's no-op handler calls first thing: the job's sequence number. The range
 * of the number says which phase the job belongs to, so one handler serves every phase.
 */
public final class Probe {

    /** Throughput jobs are numbered from 0. */
    public static final long THROUGHPUT = 0L;
    /** Single jobs of the latency phase are numbered from here. */
    public static final long LATENCY = 1_000_000_000_000L;
    /** Warm-up jobs are numbered from here. */
    public static final long WARMUP = 2_000_000_000_000L;

    private static final AtomicLong throughputStarted = new AtomicLong();
    private static final AtomicLong warmupStarted = new AtomicLong();
    private static volatile AtomicLongArray latencyStarts = new AtomicLongArray(0);

    private Probe() {
    }

    /** Called by each contender's handler as it starts. */
    public static void started(long seq) {
        if (seq >= WARMUP) {
            warmupStarted.incrementAndGet();
        } else if (seq >= LATENCY) {
            int index = (int) (seq - LATENCY);
            AtomicLongArray starts = latencyStarts;
            if (index < starts.length()) {
                // At-least-once delivery may run a job twice: the first start counts.
                starts.compareAndSet(index, 0L, System.nanoTime());
            }
        } else {
            throughputStarted.incrementAndGet();
        }
    }

    static void reset(int latencyJobs) {
        throughputStarted.set(0);
        warmupStarted.set(0);
        latencyStarts = new AtomicLongArray(latencyJobs);
    }

    static long throughputStarted() {
        return throughputStarted.get();
    }

    static long warmupStarted() {
        return warmupStarted.get();
    }

    /** The start time of latency job {@code index}, 0 while it has not started. */
    static long latencyStart(int index) {
        return latencyStarts.get(index);
    }
}
