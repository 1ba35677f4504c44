package dev.durable;

import java.time.Duration;

/** How long a failed attempt waits before the next one. */
@FunctionalInterface
public interface Backoff {

    /** The default: 1 s, doubling per attempt, capped at 5 minutes. */
    Backoff DEFAULT = exponential(Duration.ofSeconds(1), Duration.ofMinutes(5));

    /** The delay after attempt number {@code attempt} (1 for the first run) failed. */
    Duration delay(int attempt);

    /** {@code base × 2^(attempt-1)}, never above {@code cap}. */
    static Backoff exponential(Duration base, Duration cap) {
        Options.requirePositive("base", base);
        Options.requirePositive("cap", cap);
        if (cap.compareTo(base) < 0) {
            throw new IllegalArgumentException("cap must be at least base, was " + cap + " < " + base);
        }
        return attempt -> {
            int doublings = Math.min(Math.max(0, attempt - 1), 62);
            try {
                long millis = Math.multiplyExact(base.toMillis(), 1L << doublings);
                return millis > cap.toMillis() ? cap : Duration.ofMillis(millis);
            } catch (ArithmeticException overflow) {
                return cap;
            }
        };
    }

    /** The same delay after every attempt. */
    static Backoff fixed(Duration delay) {
        Options.requireNonNegative("delay", delay);
        return attempt -> delay;
    }
}
