package dev.durable.limit;

import org.jspecify.annotations.Nullable;

/**
 * One claimed row's limits, as a limiter sees them: the gate it counts against (name, key, shard)
 * and the rate limit it spends (name, partition, weight), and the sliding window it counts on (name,
 * partition, weight), any of which may be absent (stacked: admitted all or nothing).
 * {@code holder} names this claim (the worker and the row) and is the identity of the gate slot
 * the claim holds: a limiter credits and renews by it, so a late credit of an old claim can never
 * free a newer claim's slot.
 */
public record LimitClaim(long id, String holder, @Nullable String gate, @Nullable String key, int shard,
        @Nullable String rateLimit, String ratePartition, int rateWeight, @Nullable String window,
        String windowPartition, int windowWeight) {

    public LimitClaim {
        if (holder == null || holder.isEmpty()) {
            throw new IllegalArgumentException("holder must not be empty");
        }
        if (gate != null && key == null) {
            throw new IllegalArgumentException("a gated claim needs its key (gate " + gate + ")");
        }
        if (ratePartition == null) {
            throw new IllegalArgumentException("ratePartition must not be null (empty for none)");
        }
        if (windowPartition == null) {
            throw new IllegalArgumentException("windowPartition must not be null (empty for none)");
        }
        if (window != null && windowWeight < 1) {
            throw new IllegalArgumentException("windowWeight must be at least 1, was " + windowWeight);
        }
        if (rateLimit != null && rateWeight < 1) {
            throw new IllegalArgumentException("rateWeight must be at least 1, was " + rateWeight);
        }
    }

    /** A claim without a window (a gate and a rate slot, as before windows stacked). */
    public LimitClaim(long id, String holder, @Nullable String gate, @Nullable String key, int shard,
            @Nullable String rateLimit, String ratePartition, int rateWeight) {
        this(id, holder, gate, key, shard, rateLimit, ratePartition, rateWeight, null, "", 0);
    }

    /** Whether this claim holds a gate slot while it runs (rate limits hold nothing). */
    public boolean holdsSlot() {
        return gate != null;
    }

    /** The same claim without its gate: what an inline step that left its gate still holds. */
    public LimitClaim withoutGate() {
        return new LimitClaim(id, holder, null, null, 0, rateLimit, ratePartition, rateWeight, window, windowPartition,
                windowWeight);
    }
}
