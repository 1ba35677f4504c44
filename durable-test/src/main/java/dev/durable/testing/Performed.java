package dev.durable.testing;

import dev.durable.Outcome;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * What one run of a job handler or workflow step came to, as the engine would commit it, from
 * {@link DurableTesting#perform} or {@link StepRun#perform()}: no queue, no database.
 *
 * @param kind what the engine would do with the instance next
 * @param result the job's result (a step's {@code done} result)
 * @param resultJson the result as the codec encodes it (what the engine would store)
 * @param outcome the outcome a step returned (null for jobs and for steps that threw)
 * @param error the error the engine would record (a thrown error, or a step's {@code fail})
 * @param retryAfter the backoff before the next attempt, on {@link Kind#RETRY}
 * @param thrown what the handler threw, if it did
 */
public record Performed<R>(Kind kind, @Nullable R result, @Nullable String resultJson, @Nullable Outcome<?> outcome,
        @Nullable String error, @Nullable Duration retryAfter, @Nullable Throwable thrown) {

    /** What the engine would do next. */
    public enum Kind {
        /** Done with {@code result}. */
        DONE,
        /** A step moved on to another step ({@code outcome().step()}). */
        NEXT,
        /** A step parks awaiting signals. */
        AWAIT,
        /** A step spawns children. */
        SPAWN,
        /** Runs again after {@code retryAfter} (an error with attempts left, or a step's retry). */
        RETRY,
        /** Failed for good (a permanent error, the last attempt, or a step's fail). */
        FAILED,
        /** A step cancelled its instance. */
        CANCELLED
    }

    public boolean isDone() {
        return kind == Kind.DONE;
    }

    /** Fails the test unless the run came to {@code expected}; returns this for more checks. */
    public Performed<R> expect(Kind expected) {
        if (kind != expected) {
            throw new AssertionError("performed " + kind + ", expected " + expected
                    + (error != null ? " (error: " + error + ")" : "")
                    + (outcome != null ? " (outcome: " + outcome + ")" : ""), thrown);
        }
        return this;
    }
}
