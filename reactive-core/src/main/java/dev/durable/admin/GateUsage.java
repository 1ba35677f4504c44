package dev.durable.admin;

import org.jspecify.annotations.Nullable;

/**
 * The live claims of one key of a gate ({@link DurableAdmin#limits()}): {@code held} executing instances
 * of gate {@code gate} with concurrency key {@code key} whose lease is live, plus the slots of live
 * permits the engine's limiter granted ({@code engine.limits()}: the PostgreSQL limiter's rows, or what a
 * Redis limiter's counters hold), of {@code capacity} the gate admits per key (null when this engine does
 * not configure the gate: another engine's rows hold it).
 */
public record GateUsage(String gate, String key, long held, @Nullable Integer capacity) {

    /** {@code held} as a fraction of the capacity (above 1 when the capacity was lowered), 0 when unknown. */
    public double fraction() {
        return capacity == null ? 0 : (double) held / capacity;
    }
}
