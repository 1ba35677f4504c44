package dev.durable.redis.support;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Waits in integration tests for a condition; fails with what was awaited (copied from the core's tests). */
public final class Eventually {

    private Eventually() {
    }

    public static void until(String what, Duration timeout, BooleanSupplier condition) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not reached within " + timeout + ": " + what);
            }
            sleep(20);
        }
    }

    public static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }
}
