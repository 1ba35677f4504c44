package dev.durable.sync.internal;

import java.util.concurrent.ConcurrentHashMap;

/**
 * Per-partner failure backoff, counted in ticks: a partner whose every pull failed in a pass sits
 * out 1, 2, 4, ... ticks (at most {@code maxTicks}); one successful pull clears it. Ticks rather
 * than wall time, so the backoff scales with the interval and is exact under virtual time.
 */
public final class PartnerBackoff {

    private record State(int streak, long eligibleFrom) {
    }

    private final int maxTicks;
    private final ConcurrentHashMap<String, State> states = new ConcurrentHashMap<>();

    /** {@code maxTicks == 0} turns backoff off. */
    public PartnerBackoff(int maxTicks) {
        this.maxTicks = maxTicks;
    }

    /** Whether {@code partner} sits out tick number {@code tick}. */
    public boolean isBackedOff(String partner, long tick) {
        State state = states.get(partner);
        return state != null && tick < state.eligibleFrom();
    }

    /** A pull from {@code partner} succeeded: it is eligible again at once. */
    public void succeeded(String partner) {
        states.remove(partner);
    }

    /**
     * Every pull from {@code partner} failed in tick {@code tick}; returns how many ticks it now
     * sits out (0 when backoff is off).
     */
    public long failed(String partner, long tick) {
        if (maxTicks == 0) {
            return 0;
        }
        State next = states.compute(partner, (key, state) -> {
            int streak = state == null ? 1 : state.streak() + 1;
            long skip = Math.min(1L << Math.min(streak - 1, 30), maxTicks);
            return new State(streak, tick + 1 + skip);
        });
        return next.eligibleFrom() - tick - 1;
    }

    /** Consecutive failed passes of {@code partner} (0 when it is healthy). */
    public int streak(String partner) {
        State state = states.get(partner);
        return state == null ? 0 : state.streak();
    }
}
