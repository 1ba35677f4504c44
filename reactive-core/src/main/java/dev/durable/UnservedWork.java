package dev.durable;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/**
 * Work due now that no live engine can run: its queue is served by no engine, or no engine that
 * serves the queue knows its type at its version (a rolling deploy left it behind, or a type was
 * removed), or can migrate it from that version. Such rows wait, never failed for it; run an engine that knows them, or fail them on
 * purpose with {@link DurableEngine#failUnrunnable}.
 *
 * @param queue the queue
 * @param type the type, or null when the whole queue is unserved
 * @param typeVersion the type's version on the rows, or null with a null type
 * @param reason why nothing runs it
 * @param instances how many such rows were found (counted at the head of the queue: at most a sample)
 * @param oldestEligibleAt since when the oldest of them has been due
 */
public record UnservedWork(String queue, @Nullable String type, @Nullable Integer typeVersion, Reason reason,
        long instances, Instant oldestEligibleAt) {

    /** Why no live engine runs the work. */
    public enum Reason {
        /** No live engine runs the queue. */
        NO_ENGINE_SERVES_QUEUE,
        /** Engines run the queue, but none of them knows the type at that version. */
        NO_ENGINE_KNOWS_TYPE,
        /**
         * Engines run the queue and know a newer version of the type, but none can migrate this one:
         * its version is below the oldest their state migrations start from. Fail such instances on
         * purpose ({@code admin().failUnmigratable}) or deploy a migration from their version.
         */
        NO_MIGRATION_PATH
    }
}
