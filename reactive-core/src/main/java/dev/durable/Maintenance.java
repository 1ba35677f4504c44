package dev.durable;

import reactor.core.publisher.Mono;

/**
 * An engine's maintenance tasks: the reaper, the expiry of await deadlines, the garbage collection
 * of settled instances and the healing of limiter counters. An engine with
 * {@link EngineOptions.Builder#runMaintenance(boolean) runMaintenance} runs them on their own ticks;
 * each can also be run once now (a tool, a test, an operator's button), on any engine that started.
 * Every pass is bounded, and safe on any number of nodes at once.
 */
public interface Maintenance {

    /** One reaper pass: expired leases back to runnable, or to failed past max attempts; emits how many. */
    Mono<Long> reap();

    /** One pass over parked instances whose await deadline passed: they resume; emits how many. */
    Mono<Long> expireAwaits();

    /** One batch of settled instances past the retention deleted (children of live parents spared); emits how many. */
    Mono<Long> collectGarbage();

    /** Has the limiter heal its counters (PostgreSQL: recount gate counters); emits how many were wrong. */
    Mono<Long> reconcileLimits();

    /** What this engine's maintenance did so far, by its ticks and by the calls above. */
    MaintenanceStats stats();

    /**
     * Counters of an engine's maintenance since it started.
     *
     * @param reaped expired leases the reaper recovered
     * @param awaitsExpired parked instances resumed at their deadline
     * @param collected settled instances deleted
     * @param limitsHealed limiter counters found wrong and healed
     */
    record MaintenanceStats(long reaped, long awaitsExpired, long collected, long limitsHealed) {
    }
}
