package dev.durable.testing;

import java.util.List;

/**
 * What a drain ran, counted from the engine's events: instances that completed, failed for good or
 * were cancelled, attempts that failed and were scheduled again (retried), parks (awaiting a signal
 * or children), workflow steps that moved on, and the instants the test clock was moved to.
 */
public record DrainSummary(int done, int failed, int cancelled, int retried, int parked, int stepped,
        List<java.time.Instant> advancedTo) {

    public DrainSummary {
        advancedTo = List.copyOf(advancedTo);
    }

    /** Instances that settled. */
    public int settled() {
        return done + failed + cancelled;
    }
}
