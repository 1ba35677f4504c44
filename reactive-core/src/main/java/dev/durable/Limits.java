package dev.durable;

/** The limits an engine knows: named gates, rate limits and sliding windows, configured on {@link EngineOptions}. */
public final class Limits {

    private Limits() {
    }

    /**
     * Limiters key counters by name, then key or partition (Redis joins them with ':' inside a
     * hash tag): a name with ':' or braces could make two limits share one counter.
     */
    private static void requireNoSeparator(String option, String name) {
        if (name.indexOf(':') >= 0 || name.indexOf('{') >= 0 || name.indexOf('}') >= 0) {
            throw new IllegalArgumentException(option + " must not contain ':', '{' or '}', was '" + name + "'");
        }
    }

    /**
     * A named gate: at most {@code capacity} executing instances per key, counted on {@code shards}
     * counters (each holds an even share of the capacity, so a sharded gate spreads contention at
     * the price of admitting less than K when one shard is full and another is not).
     */
    public record Gate(String name, int capacity, int shards) {

        public Gate {
            Options.requireName("gate name", name);
            requireNoSeparator("gate name", name);
            Options.requireAtLeast("capacity of gate " + name, capacity, 1);
            Options.requireAtLeast("shards of gate " + name, shards, 1);
            if (shards > capacity) {
                throw new IllegalArgumentException("shards of gate " + name + " must not exceed its capacity ("
                        + capacity + "), was " + shards);
            }
        }

        /** The capacity of one shard's counter: an even share, the first shards one more. */
        public int shardCapacity(int shard) {
            return capacity / shards + (shard < capacity % shards ? 1 : 0);
        }
    }

    /**
     * A token bucket: {@code ratePerSecond} tokens flow in, at most {@code burst} are kept; an instance
     * is admitted when its weight in tokens is there.
     */
    public record RateLimit(String name, double ratePerSecond, int burst) {

        public RateLimit {
            Options.requireName("rate limit name", name);
            requireNoSeparator("rate limit name", name);
            if (!(ratePerSecond > 0) || Double.isInfinite(ratePerSecond)) {
                throw new IllegalArgumentException("rate of rate limit " + name + " must be positive, was "
                        + ratePerSecond);
            }
            Options.requireAtLeast("burst of rate limit " + name, burst, 1);
        }
    }

    /**
     * A sliding window: at most {@code limit} (in weight) admitted per partition in any {@code window}
     * of time, e.g. 1,000 calls per tenant per hour. Counted on {@link #SLOTS} + 1 slots of
     * {@code window / SLOTS} each: whatever a window's length of time holds lies in the last
     * {@code SLOTS + 1} slots, which are summed, so the limit is never exceeded over any window, at the
     * price of admitting up to one slot's worth ({@code 1/SLOTS}) less at the window's edge.
     */
    public record Window(String name, int limit, java.time.Duration window) {

        /** Slots a window is counted on. */
        public static final int SLOTS = 20;

        public Window {
            Options.requireName("window name", name);
            requireNoSeparator("window name", name);
            Options.requireAtLeast("limit of window " + name, limit, 1);
            if (window == null || window.toMillis() < SLOTS) {
                throw new IllegalArgumentException("length of window " + name + " must be at least " + SLOTS
                        + " ms, was " + window);
            }
        }

        /** The length of one slot, in milliseconds. */
        public long slotMillis() {
            return window.toMillis() / SLOTS;
        }
    }
}
