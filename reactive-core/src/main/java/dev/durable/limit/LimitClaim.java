package dev.durable.limit;

import org.jspecify.annotations.Nullable;

/**
 * One claimed row's limits, as a limiter sees them: the gate slot it holds while it runs, the rate
 * slot whose tokens it spends and the window slot it counts on, any of which may be absent
 * (stacked: admitted all or nothing). A limiter keys a rate or window slot by its
 * {@linkplain RateSlot#partitionKey() partition key}. {@code holder} names this claim (the worker
 * and the row) and is the identity of the gate slot the claim holds: a limiter credits and renews
 * by it, so a late credit of an old claim can never free a newer claim's slot.
 */
public record LimitClaim(long id, String holder, @Nullable GateSlot gate, @Nullable RateSlot rate,
        @Nullable WindowSlot window) {

    public LimitClaim {
        if (holder == null || holder.isEmpty()) {
            throw new IllegalArgumentException("holder must not be empty");
        }
        if (rate != null && rate.weight() < 1) {
            throw new IllegalArgumentException("the weight of rate slot " + rate.name() + " must be at least 1, was "
                    + rate.weight());
        }
        if (window != null && window.weight() < 1) {
            throw new IllegalArgumentException("the weight of window slot " + window.name()
                    + " must be at least 1, was " + window.weight());
        }
    }

    /** Whether this claim holds a gate slot while it runs (rate and window slots hold nothing). */
    public boolean holdsSlot() {
        return gate != null;
    }

    /** The same claim without its gate: what an inline step that left its gate still holds. */
    public LimitClaim withoutGate() {
        return new LimitClaim(id, holder, null, rate, window);
    }
}
