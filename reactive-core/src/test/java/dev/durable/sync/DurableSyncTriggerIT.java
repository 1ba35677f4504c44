package dev.durable.sync;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.QueueOptions;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Hooks;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** The durable trigger on a real PostgreSQL: pulls become jobs that complete, retry and never overlap. */
@ExtendWith(PostgresExtension.class)
class DurableSyncTriggerIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    private final List<Throwable> dropped = Collections.synchronizedList(new ArrayList<>());
    private final List<DurableEngine> engines = new ArrayList<>();

    @BeforeEach
    void catchDroppedErrors() {
        Hooks.onErrorDropped(dropped::add);
    }

    @AfterEach
    void closeEngines() {
        engines.forEach(engine -> engine.closeLater().block(WAIT));
        Hooks.resetOnErrorDropped();
        assertThat(dropped).as("errors dropped by Reactor").isEmpty();
    }

    private DurableEngine engine(TestDatabase db, DurableSyncTrigger durable, String name) {
        DurableEngine engine = durable.registerOn(DurableEngine.builder(db.engineOptions().name(name)
                        .queue(QueueOptions.builder(durable.queue()).concurrency(8)
                                .pollInterval(Duration.ofMillis(100)).maxPollInterval(Duration.ofMillis(200)).build())
                        .build()))
                .build();
        engines.add(engine);
        engine.start().block(WAIT);
        return engine;
    }

    /**
     * Waits (test thread only) until every instance has settled; returns them. By id, through
     * {@code engine.get}: {@code engine.list} renders invalid SQL in this snapshot of the engine.
     */
    private static List<Instance> settled(DurableEngine engine, List<Long> ids) {
        return Flux.fromIterable(List.copyOf(ids)).concatMap(engine::get).collectList()
                .filter(all -> all.size() == ids.size() && all.stream().allMatch(i -> i.status().isTerminal()))
                .repeatWhenEmpty(repeat -> repeat.delayElements(Duration.ofMillis(50)))
                .block(WAIT);
    }

    @Test
    void eachPartnerAndShardPullRunsAsAJobAndCompletes(TestDatabase db) {
        Map<SyncTarget, AtomicInteger> runs = new ConcurrentHashMap<>();
        DurableSyncTrigger durable = DurableSyncTrigger.builder((partner, shard) -> Mono.fromRunnable(
                () -> runs.computeIfAbsent(new SyncTarget(partner, shard), key -> new AtomicInteger()).incrementAndGet()))
                .queue("sync-each").build();
        DurableEngine engine = engine(db, durable, "sync-each");
        List<Long> ids = Collections.synchronizedList(new ArrayList<>());
        // durable.on(engine), but keeping the ids the inserts return.
        SyncPullTrigger trigger = (partner, shard) -> durable.enqueue(engine, partner, shard).doOnNext(ids::add).then();
        SyncScheduler scheduler = SyncScheduler.create(SyncSchedulerConfig.builder("1")
                .nodes(List.of("0", "1", "2", "3")).topology(SyncTopology.ring()).shardCount(2)
                .interval(Duration.ofHours(1)).build(), trigger);

        SyncStats stats = scheduler.runOnce().block(WAIT);
        List<Instance> jobs = settled(engine, ids);
        scheduler.shutdown().block(WAIT);

        assertThat(stats.operationsTriggered()).isEqualTo(4);
        assertThat(stats.failed()).isZero();
        assertThat(jobs).hasSize(4).allSatisfy(job -> {
            assertThat(job.type()).isEqualTo(DurableSyncTrigger.JOB_TYPE);
            assertThat(job.status()).isEqualTo(InstanceStatus.DONE);
        });
        assertThat(jobs).extracting(Instance::concurrencyKey)
                .containsExactlyInAnyOrder("sync:0:0", "sync:0:1", "sync:2:0", "sync:2:1");
        assertThat(runs).containsOnlyKeys(new SyncTarget("0", 0), new SyncTarget("0", 1),
                new SyncTarget("2", 0), new SyncTarget("2", 1));
        assertThat(runs.values()).allSatisfy(count -> assertThat(count).hasValue(1));
        assertThat(scheduler.lastSuccesses()).hasSize(4);
    }

    @Test
    void aFailingPullIsRetried(TestDatabase db) {
        AtomicInteger attempts = new AtomicInteger();
        DurableSyncTrigger durable = DurableSyncTrigger.builder((partner, shard) -> Mono.defer(() ->
                        attempts.incrementAndGet() == 1
                                ? Mono.error(new IllegalStateException("connection to " + partner + " reset"))
                                : Mono.empty()))
                .queue("sync-retry").backoff(Backoff.fixed(Duration.ofMillis(100))).build();
        DurableEngine engine = engine(db, durable, "sync-retry");

        Long id = durable.enqueue(engine, "0", 1).block(WAIT);
        List<Instance> jobs = settled(engine, List.of(id));

        assertThat(jobs).singleElement().satisfies(job -> {
            assertThat(job.id()).isEqualTo(id);
            assertThat(job.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(job.attempt()).isEqualTo(2);
        });
        assertThat(attempts).hasValue(2);
    }

    @Test
    void twoPullsOfOnePairNeverOverlap(TestDatabase db) {
        Map<SyncTarget, AtomicInteger> running = new ConcurrentHashMap<>();
        Map<SyncTarget, AtomicInteger> maxRunning = new ConcurrentHashMap<>();
        Map<SyncTarget, AtomicInteger> runs = new ConcurrentHashMap<>();
        DurableSyncTrigger durable = DurableSyncTrigger.builder((partner, shard) -> {
                    SyncTarget target = new SyncTarget(partner, shard);
                    return Mono.defer(() -> {
                        int now = running.computeIfAbsent(target, key -> new AtomicInteger()).incrementAndGet();
                        maxRunning.computeIfAbsent(target, key -> new AtomicInteger()).accumulateAndGet(now, Math::max);
                        runs.computeIfAbsent(target, key -> new AtomicInteger()).incrementAndGet();
                        return Mono.delay(Duration.ofMillis(150)).then();
                    })
                    // Counted off as the pull answers, before its answer goes on (the engine may start the
                    // next pull of the pair before a doFinally here would run).
                    .doOnTerminate(() -> running.get(target).decrementAndGet())
                    .doOnCancel(() -> running.get(target).decrementAndGet());
                })
                // Every trigger inserts: only the concurrency key keeps the duplicates apart.
                .queue("sync-overlap").coalesce(false).build();
        DurableEngine engine = engine(db, durable, "sync-overlap");

        List<Long> ids = Flux.range(0, 5)
                .flatMap(i -> Flux.merge(durable.enqueue(engine, "0", 0), durable.enqueue(engine, "2", 0)))
                .collectList().block(WAIT);
        List<Instance> jobs = settled(engine, ids);

        assertThat(jobs).hasSize(10).allSatisfy(job -> assertThat(job.status()).isEqualTo(InstanceStatus.DONE));
        assertThat(runs.get(new SyncTarget("0", 0))).hasValue(5);
        assertThat(runs.get(new SyncTarget("2", 0))).hasValue(5);
        assertThat(maxRunning.get(new SyncTarget("0", 0))).hasValue(1);
        assertThat(maxRunning.get(new SyncTarget("2", 0))).hasValue(1);
    }

    @Test
    void aTriggerForAPairWithAPullInFlightCoalesces(TestDatabase db) {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicBoolean started = new AtomicBoolean();
        AtomicInteger runs = new AtomicInteger();
        DurableSyncTrigger durable = DurableSyncTrigger.builder((partner, shard) -> Mono.defer(() -> {
                    runs.incrementAndGet();
                    started.set(true);
                    return gate.asMono();
                }))
                .queue("sync-coalesce").build();
        DurableEngine engine = engine(db, durable, "sync-coalesce");

        Long first = durable.enqueue(engine, "3", 0).block(WAIT);
        Mono.fromSupplier(started::get).filter(Boolean::booleanValue)
                .repeatWhenEmpty(repeat -> repeat.delayElements(Duration.ofMillis(20))).block(WAIT);
        List<Long> duplicates = Flux.range(0, 3).concatMap(i -> durable.enqueue(engine, "3", 0)).collectList().block(WAIT);
        // The trigger the scheduler sees completes quietly too.
        durable.on(engine).trigger("3", 0).block(WAIT);
        gate.tryEmitEmpty();
        List<Instance> jobs = settled(engine, List.of(first));

        assertThat(first).isNotNull();
        assertThat(duplicates).isEmpty();
        assertThat(jobs).singleElement().satisfies(job -> assertThat(job.status()).isEqualTo(InstanceStatus.DONE));
        assertThat(runs).as("one pull ran for the five triggers").hasValue(1);
        // Once settled, the key is free again.
        assertThat(durable.enqueue(engine, "3", 0).block(WAIT)).isNotNull().isNotEqualTo(first);
    }
}
