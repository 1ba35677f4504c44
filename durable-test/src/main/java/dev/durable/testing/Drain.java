package dev.durable.testing;

import dev.durable.DurableEngine;
import dev.durable.JobEvent;
import dev.durable.Maintenance;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;

/** One drain (see {@link DurableTesting#drain(DurableEngine, DrainOptions)}): blocking, tests only. */
final class Drain {

    private static final Duration TICK = Duration.ofMillis(20);

    private final DurableEngine engine;
    private final DrainOptions options;
    private final @Nullable TestClock clock;
    private final EngineDatabase database;
    private final Map<JobEvent.Kind, Integer> counts = new EnumMap<>(JobEvent.Kind.class);
    private final List<Instant> advancedTo = new ArrayList<>();
    private final List<JobEvent> beforeScope = new ArrayList<>();
    private final Duration horizon;
    private boolean scoped;
    private @Nullable Set<Long> scope;

    Drain(DurableEngine engine, DrainOptions options, @Nullable TestClock clock) {
        this.engine = engine;
        this.options = options;
        this.clock = clock;
        this.database = new EngineDatabase(engine);
        // With a test clock, what is scheduled later is reached by moving the clock, not by waiting.
        this.horizon = clock != null ? Duration.ZERO : options.horizon();
    }

    DrainSummary run() {
        long deadline = System.nanoTime() + options.timeout().toNanos();
        Disposable counting = engine.events().subscribe(this::count);
        Instant limit = clock == null || options.scheduledUpTo() == null ? null
                : clock.now().plus(options.scheduledUpTo());
        try {
            expireAwaits();
            setScope(options.recursion() ? null : new HashSet<>(database.dueNow(horizon, options.scheduled())));
            int idleSeen = 0;
            int countsAtIdle = -1;
            while (true) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("drain did not finish within " + options.timeout() + " (" + options
                            + "): " + database.stats(horizon, scopeIds()));
                }
                expireAwaits();
                engine.options().queues().keySet().forEach(engine::poke);
                EngineDatabase.Stats stats = database.stats(horizon, scopeIds());
                if (!stats.idle()) {
                    idleSeen = 0;
                    sleep();
                    continue;
                }
                // Idle twice in a row with no event in between: the events of the last commits are in.
                int events = totalCounted();
                if (idleSeen == 0 || events != countsAtIdle) {
                    idleSeen = 1;
                    countsAtIdle = events;
                    sleep();
                    continue;
                }
                if (clock != null && stats.nextEligible() != null
                        && (limit == null || !stats.nextEligible().isAfter(limit))) {
                    clock.jumpTo(stats.nextEligible());
                    advancedTo.add(stats.nextEligible());
                    idleSeen = 0;
                    continue;
                }
                return summary();
            }
        } finally {
            counting.dispose();
            database.close();
        }
    }

    /** Events that came before the scope was read count if they are of it. */
    private synchronized void setScope(@Nullable Set<Long> ids) {
        scope = ids;
        scoped = true;
        beforeScope.forEach(this::count);
        beforeScope.clear();
    }

    private synchronized @Nullable List<Long> scopeIds() {
        return scope == null ? null : List.copyOf(scope);
    }

    private void expireAwaits() {
        engine.maintenance().map(Maintenance::expireAwaits).ifPresent(expiry -> expiry.block(Duration.ofSeconds(30)));
    }

    private synchronized void count(JobEvent event) {
        if (!scoped) {
            beforeScope.add(event);
        } else if (scope == null || scope.contains(event.id())) {
            counts.merge(event.kind(), 1, Integer::sum);
        }
    }

    private synchronized int totalCounted() {
        return counts.values().stream().mapToInt(Integer::intValue).sum();
    }

    private synchronized DrainSummary summary() {
        return new DrainSummary(counts.getOrDefault(JobEvent.Kind.COMPLETED, 0),
                counts.getOrDefault(JobEvent.Kind.FAILED, 0), counts.getOrDefault(JobEvent.Kind.CANCELLED, 0),
                counts.getOrDefault(JobEvent.Kind.RETRIED, 0), counts.getOrDefault(JobEvent.Kind.PARKED, 0),
                counts.getOrDefault(JobEvent.Kind.STEPPED, 0), advancedTo);
    }

    private static void sleep() {
        try {
            Thread.sleep(TICK.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("drain interrupted", e);
        }
    }
}
