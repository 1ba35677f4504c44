package dev.durable.admin;

import java.util.List;

/**
 * The live use of gates and rate limits ({@link DurableAdmin#limits()}).
 *
 * @param gates the keys of gates with live claims, busiest first, at most {@link DurableAdmin#LIMIT_ROWS}
 * @param moreGates whether more keys hold claims than {@code gates} lists
 * @param buckets the token buckets of the PostgreSQL limiter, emptiest first, at most
 *        {@link DurableAdmin#LIMIT_ROWS}; empty when {@code bucketsInLimiter}
 * @param moreBuckets whether more buckets exist than {@code buckets} lists
 * @param bucketsInLimiter true when the engine's limiter is not the PostgreSQL one: its buckets live in
 *        that limiter ({@code limiter} names it) and are not read here
 * @param limiter the engine's limiter factory, as it names itself ("postgres" for the default)
 * @param windows the sliding windows' partitions of the PostgreSQL limiter, fullest first, at most
 *        {@link DurableAdmin#LIMIT_ROWS}; empty when {@code bucketsInLimiter}
 * @param moreWindows whether more partitions exist than {@code windows} lists
 */
public record LimitUsage(List<GateUsage> gates, boolean moreGates, List<RateBucket> buckets, boolean moreBuckets,
        boolean bucketsInLimiter, String limiter, List<WindowUsage> windows, boolean moreWindows) {

    public LimitUsage {
        gates = List.copyOf(gates);
        buckets = List.copyOf(buckets);
        windows = List.copyOf(windows);
    }

    /** Usage without windows. */
    public LimitUsage(List<GateUsage> gates, boolean moreGates, List<RateBucket> buckets, boolean moreBuckets,
            boolean bucketsInLimiter, String limiter) {
        this(gates, moreGates, buckets, moreBuckets, bucketsInLimiter, limiter, List.of(), false);
    }
}
