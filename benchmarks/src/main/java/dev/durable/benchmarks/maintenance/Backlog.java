package dev.durable.benchmarks.maintenance;

import dev.durable.DurableEngine;
import dev.durable.JobRequest;
import dev.durable.QueueStats;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The sustained-load benchmarks' producer: keeps about {@link #DEPTH} no-op jobs waiting in front of
 * one engine's queue, inserted in batches, so the engine runs at its own pace.
 */
final class Backlog {

    static final int INSERT_BATCH = 1_000;
    static final int DEPTH = 4_000;
    private static final Duration WAIT = Duration.ofMinutes(1);

    private Backlog() {
    }

    /** Inserts while {@code running}, counting into {@code inserted}; {@code label} prefixes its failures. */
    static void keep(DurableEngine engine, String queue, AtomicBoolean running, AtomicLong inserted, String label) {
        long seq = 0;
        while (running.get()) {
            if (inserted.get() - completed(engine, queue) >= DEPTH) {
                sleep(5);
                continue;
            }
            List<JobRequest> requests = new ArrayList<>(INSERT_BATCH);
            for (int i = 0; i < INSERT_BATCH; i++) {
                requests.add(JobRequest.of("noop", seq++));
            }
            try {
                engine.insertAll(requests).block(WAIT);
                inserted.addAndGet(INSERT_BATCH);
            } catch (RuntimeException e) {
                System.err.println("[" + label + "] insert failed: " + e);
                sleep(100);
            }
        }
    }

    static long completed(DurableEngine engine, String queue) {
        return engine.queueStats(queue).map(QueueStats::completed).orElse(0L);
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
