package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.internal.sql.InstanceStore;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.limit.Limiter;
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
 * forever), parked instances past their await deadline resume, and settled instances past their
 * retention are deleted in bounded batches. Gate counters are recounted on a slower tick. Each tick
 * is a {@code Flux.interval} stream that drops ticks while one is running.
 */
public final class Maintenance {

    private static final Logger log = Loggers.getLogger(Maintenance.class);
    private static final int REAP_BATCH = 1000;

    private final InstanceStore store;
    private final Limiter limiter;
    private final Duration reaperInterval;
    private final Consumer<Transition> onRecovered;
    private final Consumer<Transition> onAwaitExpired;
    private final AtomicLong reaped = new AtomicLong();
    private final AtomicLong ticksSkipped = new AtomicLong();
    private final AtomicLong collected = new AtomicLong();
    private final long retentionMillis;
    private final Duration reconcileInterval;
    private Disposable reaper = reactor.core.Disposables.disposed();
    private Disposable reconciler = reactor.core.Disposables.disposed();

    public Maintenance(InstanceStore store, Limiter limiter, Duration reaperInterval, Duration retention,
            Duration reconcileInterval, Consumer<Transition> onRecovered, Consumer<Transition> onAwaitExpired) {
        this.limiter = limiter;
        this.retentionMillis = retention.toMillis();
        this.reconcileInterval = reconcileInterval;
        this.store = store;
        this.reaperInterval = reaperInterval;
        this.onRecovered = onRecovered;
        this.onAwaitExpired = onAwaitExpired;
    }

    public void start() {
        reaper = Flux.interval(reaperInterval)
                .onBackpressureDrop(tick -> ticksSkipped.incrementAndGet())
                .concatMap(tick -> reapOnce().then(expireAwaitsOnce()).then(collectGarbageOnce()).onErrorResume(error -> {
                    log.warn("maintenance tick failed, the next one tries again: {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("maintenance loop failed", error));
        reconciler = Flux.interval(reconcileInterval)
                .onBackpressureDrop()
                .concatMap(tick -> reconcileOnce().onErrorResume(error -> {
                    log.warn("gate reconcile failed, the next one tries again: {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("reconcile loop failed", error));
    }

    /** Deletes one batch of settled instances past their retention (children of live parents spared). */
    public Mono<Long> collectGarbageOnce() {
        return store.collectGarbage(retentionMillis, REAP_BATCH).doOnNext(collected::addAndGet);
    }

    /** Has the limiter heal its counters (PostgreSQL: recount from the executing rows); emits how many were off. */
    public Mono<Long> reconcileOnce() {
        return limiter.reconcile().doOnNext(healed -> {
            if (healed > 0) {
                log.warn("reconcile healed {} gate counters", healed);
            }
        });
    }

    public long collected() {
        return collected.get();
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
        reconciler.dispose();
    }
}
