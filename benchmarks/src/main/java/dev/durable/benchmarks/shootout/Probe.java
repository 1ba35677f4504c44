package dev.durable.benchmarks.shootout;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * What every contender's no-op handler calls first thing: the job's sequence number. The range
 * of the number says which phase the job belongs to, so one handler serves every phase. A
 * contender that learns when a job's outcome is committed says so with {@link #settled}; only the
 * jobs of a load phase (the open-loop arrivals of {@link SustainedProtocol}) record it.
 */
public final class Probe {

    /** Throughput jobs are numbered from 0. */
    public static final long THROUGHPUT = 0L;
    /** Single jobs of the latency phase are numbered from here. */
    public static final long LATENCY = 1_000_000_000_000L;
    /** Warm-up jobs are numbered from here. */
    public static final long WARMUP = 2_000_000_000_000L;
    /** Open-loop arrivals of a load phase are numbered from here. */
    public static final long LOAD = 3_000_000_000_000L;

    private static final AtomicLong throughputStarted = new AtomicLong();
    private static final AtomicLong warmupStarted = new AtomicLong();
    private static volatile AtomicLongArray latencyStarts = new AtomicLongArray(0);
    private static volatile AtomicLongArray loadStarts = new AtomicLongArray(0);
    private static volatile AtomicLongArray loadSettles = new AtomicLongArray(0);

    private Probe() {
    }

    /** Called by each contender's handler as it starts. */
    public static void started(long seq) {
        if (seq >= LOAD) {
            first(loadStarts, seq - LOAD);
        } else if (seq >= WARMUP) {
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

    /** Called by a contender once the job's outcome is committed, where it can tell. */
    public static void settled(long seq) {
        settledAt(seq, System.nanoTime());
    }

    /** {@link #settled} at a {@link System#nanoTime()} seen earlier. */
    static void settledAt(long seq, long nanos) {
        if (seq >= LOAD) {
            first(loadSettles, seq - LOAD, nanos);
        }
    }

    private static void first(AtomicLongArray times, long index) {
        first(times, index, System.nanoTime());
    }

    /** Records {@code nanos} at {@code index} unless a time is there already (a second run of the job). */
    private static void first(AtomicLongArray times, long index, long nanos) {
        if (index < times.length()) {
            times.compareAndSet((int) index, 0L, nanos);
        }
    }

    /** Starts a load phase of {@code jobs} arrivals, numbered from {@link #LOAD}. */
    static void resetLoad(int jobs) {
        loadStarts = new AtomicLongArray(jobs);
        loadSettles = new AtomicLongArray(jobs);
    }

    /** When load job {@code index} started, 0 while it has not. */
    static long loadStart(int index) {
        return loadStarts.get(index);
    }

    /** When load job {@code index}'s outcome was seen committed, 0 while it has not (or cannot be seen). */
    static long loadSettle(int index) {
        return loadSettles.get(index);
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
