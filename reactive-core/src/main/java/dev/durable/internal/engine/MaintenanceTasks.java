package dev.durable.internal.engine;

import dev.durable.EngineOptions;
import dev.durable.Maintenance;
import dev.durable.internal.maintenance.Analyzer;
import dev.durable.internal.maintenance.AwaitExpiry;
import dev.durable.internal.maintenance.BucketSweeper;
import dev.durable.internal.maintenance.FairKeyHealer;
import dev.durable.internal.maintenance.GarbageCollector;
import dev.durable.internal.maintenance.KeyHealer;
import dev.durable.internal.maintenance.SkippedKeyElections;
import dev.durable.internal.maintenance.Lane;
import dev.durable.internal.maintenance.LimiterReconcile;
import dev.durable.internal.maintenance.MaintenanceService;
import dev.durable.internal.maintenance.Reaper;
import dev.durable.internal.maintenance.Vacuumer;
import dev.durable.internal.sql.FairSql;
import dev.durable.internal.sql.KeySql;
import dev.durable.internal.sql.LeaseSql;
import dev.durable.internal.sql.MaintenanceSql;
import dev.durable.internal.sql.StatisticsSql;
import dev.durable.internal.sql.VacuumSql;
import dev.durable.limit.Limiter;
import java.util.List;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * An engine's maintenance: one service per task (see {@code dev.durable.internal.maintenance}), each
 * on its own tick with its own options, all taking turns on one lane so maintenance holds at most
 * one connection of the engine's pool at a time.
 */
public final class MaintenanceTasks implements Maintenance {

    private final Lane lane;
    private final Reaper reaper;
    private final AwaitExpiry awaitExpiry;
    private final GarbageCollector garbageCollector;
    private final LimiterReconcile limiterReconcile;
    private final BucketSweeper bucketSweeper;
    private final FairKeyHealer fairKeyHealer;
    private final KeyHealer keyHealer;
    private final SkippedKeyElections skippedKeyElections;
    private final Analyzer analyzer;
    private final Vacuumer vacuumer;
    private final List<MaintenanceService> services;

    MaintenanceTasks(EngineOptions options, LeaseSql leases, MaintenanceSql sql, FairSql fair, KeySql keys,
            StatisticsSql statistics, VacuumSql vacuums, Limiter limiter, LeaseSql.RetryDelay delays, Scheduler timer,
            Transitions transitions) {
        var meters = options.meterRegistry();
        this.lane = new Lane(options.name());
        this.reaper = new Reaper(options.reaper(), lane, timer, meters, leases, delays, transitions);
        this.awaitExpiry = new AwaitExpiry(options.awaitExpiry(), lane, timer, meters, sql, transitions);
        this.garbageCollector = new GarbageCollector(options.garbageCollector(), lane, timer, meters, sql,
                options.retention());
        this.limiterReconcile = new LimiterReconcile(options.limiterReconcile(), lane, timer, meters, limiter);
        this.bucketSweeper = new BucketSweeper(options.bucketSweeper(), lane, timer, meters, sql,
                limiter.admitsInPick() ? options.rateLimits().values() : List.of(), limiter);
        this.fairKeyHealer = new FairKeyHealer(options.fairKeyHealer(), lane, timer, meters, fair,
                options.queues().values().stream().filter(queue -> queue.fairness().enabled())
                        .map(dev.durable.QueueOptions::name).collect(java.util.stream.Collectors.toSet()),
                options.queues().keySet().stream()
                        .filter(queue -> !options.gates().containsKey(dev.durable.Fairness.capGate(queue)))
                        .collect(java.util.stream.Collectors.toSet()));
        this.keyHealer = new KeyHealer(options.keyHealer(), lane, timer, meters, keys, transitions::poke);
        this.skippedKeyElections = new SkippedKeyElections(options.skippedKeyElections(), lane, timer, meters, keys,
                transitions::poke);
        this.analyzer = new Analyzer(options.analyzer(), lane, timer, meters, statistics);
        this.vacuumer = new Vacuumer(options.vacuumer(), lane, timer, meters, vacuums);
        this.services = List.of(reaper, awaitExpiry, garbageCollector, limiterReconcile, bucketSweeper,
                fairKeyHealer, keyHealer, skippedKeyElections, analyzer, vacuumer);
    }

    /** Starts the tick of every task that is switched on. */
    void start() {
        services.forEach(MaintenanceService::start);
    }

    /** Stops every tick and closes the lane; a batch under way is cancelled (its transaction rolls back). */
    void stop() {
        services.forEach(MaintenanceService::stop);
        lane.close();
    }

    @Override
    public Mono<Long> reap() {
        return reaper.pass();
    }

    @Override
    public Mono<Long> expireAwaits() {
        return awaitExpiry.pass();
    }

    @Override
    public Mono<Long> collectGarbage() {
        return garbageCollector.pass();
    }

    @Override
    public Mono<Long> reconcileLimits() {
        return limiterReconcile.pass();
    }

    @Override
    public Mono<Long> sweepBuckets() {
        return bucketSweeper.pass();
    }

    @Override
    public Mono<Long> healFairKeys() {
        return fairKeyHealer.pass();
    }

    @Override
    public Mono<Long> healKeys() {
        return skippedKeyElections.pass().flatMap(retried -> keyHealer.pass().map(walked -> retried + walked));
    }

    @Override
    public Mono<Long> analyze() {
        return analyzer.pass();
    }

    @Override
    public Mono<Long> vacuum() {
        return vacuumer.pass();
    }

    @Override
    public MaintenanceStats stats() {
        return new MaintenanceStats(reaper.handled(), awaitExpiry.handled(), garbageCollector.handled(),
                limiterReconcile.handled(), bucketSweeper.handled(),
                services.stream().mapToLong(MaintenanceService::failures).sum());
    }
}
