package dev.durable.admin;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/**
 * One attempt of an instance ({@link InstanceDetail#attempts()}): its number (attempts count from 1 per
 * step, and start again at a retry in place), the step it ran, the worker whose claim ran it and when
 * that claim began (null where the instance's row no longer says: the last attempt of a settled
 * instance), when it ended (null while it runs), how it ended, and its error.
 */
public record Attempt(int attempt, String step, @Nullable String worker, @Nullable Instant startedAt,
        @Nullable Instant finishedAt, Outcome outcome, @Nullable String error) {

    /** How an attempt ended. */
    public enum Outcome {
        /** It runs now. */
        RUNNING,
        /** It failed and the instance runs again after its backoff. */
        RETRIED,
        /** Its worker's lease expired (the worker died, stalled or lost the database) and the reaper took it back. */
        LEASE_LOST,
        /** The instance settled done with it. */
        DONE,
        /** The instance failed with it (its last error). */
        FAILED,
        /** The instance was cancelled with it. */
        CANCELLED,
        /**
         * Not a run: the settled instance was replayed from {@code step} ({@code DurableEngine.replay});
         * {@code error} says with which state. The attempt it had settled with is kept before it.
         */
        REPLAYED,
        /** Not a run: the instance was forked from another one's {@code step} ({@code DurableEngine.fork}). */
        FORKED
    }
}
