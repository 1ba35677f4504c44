package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.Maintenance.MaintenanceStats;
import dev.durable.internal.sql.LeaseSql;
import dev.durable.internal.sql.MaintenanceSql;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.limit.Limiter;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The maintenance tasks any node may run: the reaper returns expired leases to runnable (or to
 * failed once their attempts are spent, so a step that keeps killing its worker cannot retry
 * forever), parked instances past their await deadline resume, and settled instances past their
 * retention are deleted in bounded batches. Limiter counters are healed on a slower tick. Each
 * tick is a {@code Flux.interval} stream that drops ticks while one is running.
 */
public final class MaintenanceTasks implements dev.durable.Maintenance {

    private static final Logger log = Loggers.getLogger(MaintenanceTasks.class);
    private static final int BATCH = 1000;

    private final LeaseSql leases;
    private final MaintenanceSql sql;
    private final Limiter limiter;
    private final long retentionMillis;
    private final Consumer<Transition> onRecovered;
    private final Consumer<Transition> onAwaitExpired;
    private final AtomicLong reaped = new AtomicLong();
    private final AtomicLong awaitsExpired = new AtomicLong();
    private final AtomicLong collected = new AtomicLong();
    private final AtomicLong healed = new AtomicLong();
    private final Disposable.Composite ticks = Disposables.composite();

    MaintenanceTasks(LeaseSql leases, MaintenanceSql sql, Limiter limiter, Duration retention,
            Consumer<Transition> onRecovered, Consumer<Transition> onAwaitExpired) {
        this.leases = leases;
        this.sql = sql;
        this.limiter = limiter;
        this.retentionMillis = retention.toMillis();
        this.onRecovered = onRecovered;
        this.onAwaitExpired = onAwaitExpired;
    }

    /** Runs the tasks on their ticks until {@link #stop()}. */
    void start(Duration reaperInterval, Duration reconcileInterval) {
        ticks.add(Flux.interval(reaperInterval)
                .onBackpressureDrop()
                .concatMap(tick -> reap().then(expireAwaits()).then(collectGarbage()).onErrorResume(error -> {
                    log.warn("maintenance tick failed, the next one tries again: {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("maintenance loop failed", error)));
        ticks.add(Flux.interval(reconcileInterval)
                .onBackpressureDrop()
                .concatMap(tick -> reconcileLimits().onErrorResume(error -> {
                    log.warn("limiter reconcile failed, the next one tries again: {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("reconcile loop failed", error)));
    }

    void stop() {
        ticks.dispose();
    }

    @Override
    public Mono<Long> reap() {
        return leases.recoverExpired(0, null, "", BATCH)
                .doOnNext(transition -> {
                    reaped.incrementAndGet();
                    if (transition.status() == InstanceStatus.FAILED) {
                        log.warn("instance {} failed: its lease expired on its last attempt", transition.id());
                    }
                    onRecovered.accept(transition);
                })
                .count();
    }

    @Override
    public Mono<Long> expireAwaits() {
        return sql.expireAwaits(BATCH)
                .doOnNext(transition -> {
                    awaitsExpired.incrementAndGet();
                    onAwaitExpired.accept(transition);
                })
                .count();
    }

    @Override
    public Mono<Long> collectGarbage() {
        return sql.collectGarbage(retentionMillis, BATCH).doOnNext(collected::addAndGet);
    }

    @Override
    public Mono<Long> reconcileLimits() {
        return limiter.reconcile().doOnNext(wrong -> {
            if (wrong > 0) {
                healed.addAndGet(wrong);
                log.warn("reconcile healed {} limiter counters", wrong);
            }
        });
    }

    @Override
    public MaintenanceStats stats() {
        return new MaintenanceStats(reaped.get(), awaitsExpired.get(), collected.get(), healed.get());
    }
}
