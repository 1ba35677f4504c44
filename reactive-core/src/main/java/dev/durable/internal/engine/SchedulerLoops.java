package dev.durable.internal.engine;

import java.time.Duration;
import java.util.function.Supplier;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The timers that drive one {@link QueueScheduler}, each on the given scheduler (virtual time in
 * tests): the idle poll, a delay re-armed after each tick so its interval can change between ticks;
 * pokes, coalesced in a window (the first goes straight through, those during the window after it
 * collapse into the latest, handled when the window ends); the heartbeat and the limiter's slot
 * renewal, each a {@code Flux.interval} whose tick is dropped (counted) while the previous one still
 * runs. The poll and pokes stop first on close; the heartbeats go on through the drain, so running
 * rows keep their leases.
 */
final class SchedulerLoops {

    private static final Logger log = Loggers.getLogger(SchedulerLoops.class);

    private final String queue;
    private final Duration heartbeatInterval;
    private final Duration pokeWindow;
    private final Scheduler timer;
    private final SchedulerCounters counters;
    private final Disposable.Composite claiming = Disposables.composite();
    private final Disposable.Composite heartbeats = Disposables.composite();

    SchedulerLoops(String queue, Duration heartbeatInterval, Duration pokeWindow,
            Scheduler timer, SchedulerCounters counters) {
        this.queue = queue;
        this.heartbeatInterval = heartbeatInterval;
        this.pokeWindow = pokeWindow;
        this.timer = timer;
        this.counters = counters;
    }

    /**
     * Starts the four loops: a poll after each {@code pollInterval} (read anew after each tick), a poke
     * for this queue's name in {@code pokes}, a {@code heartbeat} and a {@code slotRenewal} every
     * heartbeat interval.
     */
    void start(Supplier<Duration> pollInterval, Runnable polled, Flux<String> pokes, Runnable poked,
            Supplier<Mono<?>> heartbeat, Supplier<Mono<Void>> slotRenewal) {
        claiming.add(Flux.defer(() -> Mono.delay(pollInterval.get(), timer)).repeat()
                .subscribe(tick -> polled.run(), error -> log.error("queue {}: poll loop failed", queue, error)));
        claiming.add(pokes.filter(queue::equals)
                .onBackpressureLatest()
                .concatMap(queueName -> {
                    counters.pokesHandled.incrementAndGet();
                    poked.run();
                    return Mono.delay(pokeWindow, timer);
                }, 0)
                .subscribe(null, error -> log.error("queue {}: poke loop failed", queue, error)));
        heartbeats.add(Flux.interval(heartbeatInterval, timer)
                .onBackpressureDrop(tick -> counters.heartbeatsSkipped.incrementAndGet())
                .concatMap(tick -> heartbeat.get(), 0)
                .subscribe(null, error -> log.error("queue {}: heartbeat loop failed", queue, error)));
        heartbeats.add(Flux.interval(heartbeatInterval, timer)
                .onBackpressureDrop()
                .concatMap(tick -> slotRenewal.get(), 0)
                .subscribe(null, error -> log.error("queue {}: slot renewal loop failed", queue, error)));
    }

    /** Stops the poll and the pokes: nothing new is claimed. */
    void stopClaiming() {
        claiming.dispose();
    }

    /** Stops every loop, the heartbeats too. */
    void stop() {
        claiming.dispose();
        heartbeats.dispose();
    }
}
