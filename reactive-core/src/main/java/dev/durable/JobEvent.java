package dev.durable;

import java.time.Duration;
import java.time.Instant;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;

/**
 * Something that happened to an instance on this engine, as {@link DurableEngine#events()} streams
 * it. Every event names its instance's {@code type}; {@code step} is null on events that are not
 * about a run or its claim (a signal, a cancel, a reaped row), {@code duration} is the run's time on
 * outcomes of a run. The events of one instance come in the order of what happened to it.
 */
public record JobEvent(
        Kind kind,
        long id,
        String type,
        String queue,
        @Nullable String step,
        int attempt,
        Instant at,
        @Nullable Duration duration,
        @Nullable String error) {

    /** What happened. */
    public enum Kind {
        /**
         * Inserted (by this engine). An insert inside a caller's transaction says so when its
         * statement has run: the transaction may still roll back.
         */
        INSERTED,
        /** Claimed by a pick into a scheduler's buffer. */
        PICKED,
        /** Its handler was invoked. */
        STARTED,
        /** Done. */
        COMPLETED,
        /** A workflow step committed its next step. */
        STEPPED,
        /** An attempt failed; it runs again after its backoff. */
        RETRIED,
        /** Failed for good. */
        FAILED,
        /** Cancelled. */
        CANCELLED,
        /** Its outcome was dropped: the run had lost its lease. */
        STALE,
        /** Its expired lease was recovered by the reaper or a startup reclaim. */
        REAPED,
        /** Parked, awaiting a signal or its children. */
        PARKED,
        /** Woken from park by a signal, its last child, or its await deadline. */
        WOKEN,
        /** A signal was stored in its inbox. */
        SIGNALLED,
        /**
         * A pick found rows held back by a full gate or an empty bucket: one event per pick and
         * reason (not per row), naming one of those rows; {@code error} says the reason and how many.
         */
        THROTTLED
    }

    /** Events of one queue. */
    public static Predicate<JobEvent> ofQueue(String queue) {
        return event -> event.queue().equals(queue);
    }

    /** Events of one type. */
    public static Predicate<JobEvent> ofType(String type) {
        return event -> type.equals(event.type());
    }

    /** Events of one instance. */
    public static Predicate<JobEvent> ofInstance(long id) {
        return event -> event.id() == id;
    }

    /** True for the kinds after which the instance is settled. */
    public boolean isSettling() {
        return kind == Kind.COMPLETED || kind == Kind.FAILED || kind == Kind.CANCELLED;
    }
}
