package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.internal.sql.InstanceStore;
import dev.durable.internal.sql.Rows.Transition;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The maintenance ticks any node may run: the reaper returns expired leases to runnable (or to
 * failed once their attempts are spent, so a step that keeps killing its worker cannot retry
 * forever), and parked instances past their await deadline resume. The tick is a
 * {@code Flux.interval} stream that drops ticks while one is running.
 */
public final class Maintenance {

    private static final Logger log = Loggers.getLogger(Maintenance.class);
    private static final int REAP_BATCH = 1000;

    private final InstanceStore store;
    private final Duration reaperInterval;
    private final Consumer<Transition> onRecovered;
    private final Consumer<Transition> onAwaitExpired;
    private final AtomicLong reaped = new AtomicLong();
    private final AtomicLong ticksSkipped = new AtomicLong();
    private Disposable reaper = reactor.core.Disposables.disposed();

    public Maintenance(InstanceStore store, Duration reaperInterval, Consumer<Transition> onRecovered,
            Consumer<Transition> onAwaitExpired) {
        this.store = store;
        this.reaperInterval = reaperInterval;
        this.onRecovered = onRecovered;
        this.onAwaitExpired = onAwaitExpired;
    }

    public void start() {
        reaper = Flux.interval(reaperInterval)
                .onBackpressureDrop(tick -> ticksSkipped.incrementAndGet())
                .concatMap(tick -> reapOnce().then(expireAwaitsOnce()).onErrorResume(error -> {
                    log.warn("maintenance tick failed, the next one tries again: {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("maintenance loop failed", error));
    }

    /** Resumes up to one batch of parked instances whose await deadline passed. */
    public Mono<Long> expireAwaitsOnce() {
        return store.expireAwaits(REAP_BATCH)
                .doOnNext(onAwaitExpired)
                .count();
    }

    /** One reaper pass over up to one batch of expired leases; emits how many it recovered. */
    public Mono<Long> reapOnce() {
        return store.recoverExpired(0, null, "", REAP_BATCH)
                .doOnNext(transition -> {
                    reaped.incrementAndGet();
                    if (transition.status() == InstanceStatus.FAILED) {
                        log.warn("instance {} failed: its lease expired on its last attempt", transition.id());
                    }
                    onRecovered.accept(transition);
                })
                .count();
    }

    public long reaped() {
        return reaped.get();
    }

    public void stop() {
        reaper.dispose();
    }
}
