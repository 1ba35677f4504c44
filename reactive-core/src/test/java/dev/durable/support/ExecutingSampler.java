package dev.durable.support;

import dev.durable.testing.TestDatabase;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Samples, continuously on its own thread, how many rows matching a condition are executing: the
 * limit tests check the highest count never passes the limit.
 */
public final class ExecutingSampler implements AutoCloseable {

    private final AtomicBoolean running = new AtomicBoolean(true);
    private final AtomicLong max = new AtomicLong();
    private final AtomicLong samples = new AtomicLong();
    private final Thread thread;

    public ExecutingSampler(TestDatabase db, String where) {
        thread = new Thread(() -> {
            while (running.get()) {
                max.accumulateAndGet(Sql.count(db, "status = 'executing' AND " + where), Math::max);
                samples.incrementAndGet();
            }
        }, "executing-sampler");
        thread.start();
    }

    /** The most executing rows seen in one sample. */
    public long max() {
        return max.get();
    }

    public long samples() {
        return samples.get();
    }

    @Override
    public void close() throws InterruptedException {
        running.set(false);
        thread.join();
    }
}
