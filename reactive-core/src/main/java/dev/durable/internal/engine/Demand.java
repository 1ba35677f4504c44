package dev.durable.internal.engine;

import dev.durable.PickTrigger;
import org.jspecify.annotations.Nullable;

/**
 * The pick decision of a queue scheduler, as a pure function so it can be tested on its own.
 *
 * <p>Demand is the gap between the claim ceiling ({@code concurrency + prefetch}) and what the
 * scheduler holds (running + buffered). A pick asks for the whole gap, and only when it reaches
 * {@code minDemand}, so picks come fat, except when the scheduler is fully idle, so a small
 * backlog never starves. What else applies depends on why the scheduler is deciding.
 */
final class Demand {

    private Demand() {
    }

    /** Why the scheduler is deciding whether to pick. */
    enum Trigger {
        /** The poll timer fired: pick if demand reaches min demand, or when idle. */
        POLL,
        /** A poke: only a fully idle scheduler acts; a busy one refills on its own. */
        POKE,
        /**
         * A run finished and freed a slot: serve the buffer, and pick once the free demand reaches
         * min demand, buffer empty or not, so the buffer is refilled before it runs dry.
         */
        DEMAND,
        /** A pick came back full, so more may be waiting: as for the poll. */
        PICKED_FULL,
        /** A pick came back short: hand out what it brought, pick nothing. */
        PICKED,
        /** Rows this scheduler claimed as they were inserted: hand them out, pick nothing. */
        INSERT,
        /**
         * A run's handler finished and its outcome waits for its commit: its slot takes a buffered
         * row, and nothing is picked, since the row's claim is not free until the commit (the run's
         * end is a {@link #DEMAND}).
         */
        COMMITTING;

        /** The public reason a pick made for this trigger is counted under; null when it never picks. */
        @Nullable PickTrigger counted() {
            return switch (this) {
                case POLL -> PickTrigger.POLL;
                case POKE -> PickTrigger.POKE;
                case DEMAND -> PickTrigger.DEMAND;
                case PICKED_FULL -> PickTrigger.PICKED_FULL;
                case INSERT -> PickTrigger.INSERT;
                case PICKED, COMMITTING -> null;
            };
        }
    }

    /**
     * How many rows to pick now, 0 for none.
     *
     * @param running rows handed to runs and not finished (those waiting only for their outcome's
     *     commit included)
     * @param buffered rows claimed and waiting for a free slot
     * @param lastPickEmpty the last pick came back empty: then a finished run that still has
     *     buffered rows to start does not refill (the queue looked empty; a poll or poke says when it
     *     is not), so a queue's tail is not read once per finished run
     */
    static int pickSize(Trigger trigger, int running, int buffered, int claimCeiling, int minDemand,
            boolean lastPickEmpty) {
        int held = running + buffered;
        int demand = claimCeiling - held;
        boolean idle = held == 0;
        if (demand <= 0 || trigger == Trigger.PICKED || trigger == Trigger.INSERT || trigger == Trigger.COMMITTING) {
            return 0;
        }
        if (trigger == Trigger.POKE) {
            return idle ? demand : 0;
        }
        if (trigger == Trigger.DEMAND && buffered > 0 && lastPickEmpty) {
            return 0;
        }
        return demand >= minDemand || idle ? demand : 0;
    }
}
