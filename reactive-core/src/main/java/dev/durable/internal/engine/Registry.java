package dev.durable.internal.engine;

import dev.durable.LiveEngine;
import dev.durable.UnservedWork;
import dev.durable.internal.sql.RegistrySql;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * This engine's entry in the registry of live engines, and what the registry tells it. The entry
 * (queues served, types known at their versions) is refreshed with every heartbeat tick, expires a
 * lease TTL after the engine stops refreshing it and is removed when the engine closes. Each
 * refresh returns the whole fleet, kept here: an insert into a queue no live engine serves is
 * warned about at once, and, every so often, the work no live engine can run is counted into the
 * {@code durable.unserved} gauges.
 */
public final class Registry {

    private static final Logger log = Loggers.getLogger(Registry.class);
    /** How many due rows at the head of a queue are looked at for types nobody knows. */
    static final int HEAD_SAMPLE = 1000;
    /** Work nobody runs is counted every this many refreshes (not every tick: it reads the queues' heads). */
    private static final int UNSERVED_EVERY = 6;
    /** An unserved queue is warned about at most once in this long. */
    private static final Duration WARN_EVERY = Duration.ofMinutes(1);

    private final RegistrySql sql;
    private final RegistrySql.Entry entry;
    private final Scheduler timer;
    private final AtomicReference<List<LiveEngine>> fleet = new AtomicReference<>(List.of());
    /** The paused queues, as the last refresh read them (claim-on-insert skips them). */
    private final AtomicReference<java.util.Set<String>> paused = new AtomicReference<>(java.util.Set.of());
    private final Map<String, Long> warned = new ConcurrentHashMap<>();
    private final MultiGauge unservedGauge;
    private final Disposable.Swap ticks = Disposables.swap();
    private long refreshes;

    Registry(RegistrySql sql, RegistrySql.Entry entry, Scheduler timer, MeterRegistry meters) {
        this.sql = sql;
        this.entry = entry;
        this.timer = timer;
        Gauge.builder("durable.engines.live", fleet, engines -> engines.get().size())
                .description("live engines in the registry, as this engine last read it").register(meters);
        this.unservedGauge = MultiGauge.builder("durable.unserved")
                .description("rows due now that no live engine can run (sampled at the head of each queue)")
                .register(meters);
    }

    /** Registers this engine; the first refresh, before the queues start. */
    Mono<Void> register() {
        return refresh();
    }

    /** Refreshes the entry on every tick until {@link #close()}. */
    void start(Duration interval) {
        ticks.update(Flux.interval(interval, interval, timer)
                .onBackpressureDrop()
                .concatMap(tick -> refresh().then(++refreshes % UNSERVED_EVERY == 0 ? countUnserved() : Mono.empty())
                        .onErrorResume(error -> {
                            log.warn("engine registry not refreshed: {}", error.toString());
                            return Mono.empty();
                        }), 0)
                .subscribe(null, error -> log.error("engine registry loop failed", error)));
    }

    private Mono<Void> refresh() {
        return sql.refresh(entry).collectList().doOnNext(fleet::set)
                .then(sql.pausedQueues().collect(java.util.stream.Collectors.toUnmodifiableSet()).doOnNext(paused::set))
                .then();
    }

    /** Whether {@code queue} was paused at the last refresh (at most a heartbeat interval ago). */
    boolean paused(String queue) {
        return paused.get().contains(queue);
    }

    private Mono<Void> countUnserved() {
        return unserved(sql).collectList().doOnNext(work -> {
            List<MultiGauge.Row<?>> rows = new ArrayList<>();
            Map<String, Long> byQueue = new LinkedHashMap<>();
            for (UnservedWork unserved : work) {
                byQueue.merge(unserved.queue() + '\0' + unserved.reason().name(), unserved.instances(), Long::sum);
            }
            byQueue.forEach((key, count) -> {
                String[] parts = key.split("\0", 2);
                rows.add(MultiGauge.Row.of(Tags.of("queue", parts[0], "reason", parts[1].toLowerCase()), count));
            });
            unservedGauge.register(rows, true);
        }).then();
    }

    /** The live engines, as the last refresh saw them. */
    List<LiveEngine> fleet() {
        return fleet.get();
    }

    /** Warns, at most once a minute per queue, about inserts into queues no live engine serves. */
    public void warnIfUnserved(Collection<String> queues) {
        List<LiveEngine> engines = fleet.get();
        if (engines.isEmpty()) {
            return; // not read yet
        }
        for (String queue : queues) {
            if (engines.stream().noneMatch(engine -> engine.queues().contains(queue))) {
                long now = System.nanoTime();
                Long last = warned.get(queue);
                if (last == null || now - last > WARN_EVERY.toNanos()) {
                    warned.put(queue, now);
                    log.warn("instances were inserted into queue '{}', which no live engine runs: they wait until"
                            + " an engine with that queue starts (live engines: {})", queue,
                            engines.stream().map(LiveEngine::name).distinct().toList());
                }
            }
        }
    }

    /** Stops refreshing and removes the entry, within {@link QueueScheduler#CLOSE_STEP}. */
    Mono<Void> close() {
        return Mono.defer(() -> {
            ticks.dispose();
            return sql.deregister(entry.origin());
        }).timeout(QueueScheduler.CLOSE_STEP, Mono.empty()).onErrorResume(error -> {
            log.warn("engine registry entry not removed ({}); it expires by itself", error.toString());
            return Mono.empty();
        });
    }

    /** Rows failed per statement by {@link #failUnrunnable}: short transactions, however many rows. */
    private static final int FAIL_BATCH = 1000;

    /** Fails every live (runnable or parked) instance of {@code type} with {@code reason}; emits how many. */
    public static Mono<Long> failUnrunnable(RegistrySql sql, String type, String reason) {
        return sql.failType(type, reason, FAIL_BATCH)
                .expand(failed -> failed == FAIL_BATCH ? sql.failType(type, reason, FAIL_BATCH) : Mono.empty())
                .reduce(0L, Long::sum);
    }

    /**
     * The work due now that no live engine can run: whole queues no engine serves, and, in served
     * queues, rows whose type at its version no serving engine knows (found at the head of the
     * queue, where such rows gather since nobody picks them).
     */
    public static Flux<UnservedWork> unserved(RegistrySql sql) {
        return sql.live().collectList().flatMapMany(engines -> sql.dueQueues().concatMap(queue -> {
            List<LiveEngine> serving = engines.stream().filter(engine -> engine.queues().contains(queue)).toList();
            if (serving.isEmpty()) {
                return sql.unknownTypes(queue, List.of(), List.of(), List.of(), HEAD_SAMPLE)
                        .collectList()
                        .filter(rows -> !rows.isEmpty())
                        .map(rows -> new UnservedWork(queue, null, null, UnservedWork.Reason.NO_ENGINE_SERVES_QUEUE,
                                rows.stream().mapToLong(RegistrySql.UnknownType::instances).sum(),
                                rows.stream().map(RegistrySql.UnknownType::oldestEligibleAt).min(java.util.Comparator.naturalOrder())
                                        .orElseThrow()))
                        .flux();
            }
            // One range per engine and type: a v1-only node and a v3 node that migrates from 2 leave 1..3 served.
            List<String> types = new ArrayList<>();
            List<Integer> lowest = new ArrayList<>();
            List<Integer> versions = new ArrayList<>();
            for (LiveEngine engine : serving) {
                engine.types().forEach((type, version) -> {
                    types.add(type);
                    lowest.add(engine.lowestVersion(type));
                    versions.add(version);
                });
            }
            return sql.unknownTypes(queue, types, lowest, versions, HEAD_SAMPLE)
                    .map(row -> new UnservedWork(queue, row.type(), row.typeVersion(),
                            serving.stream().anyMatch(engine -> engine.types().getOrDefault(row.type(), 0) > row.typeVersion())
                                    ? UnservedWork.Reason.NO_MIGRATION_PATH : UnservedWork.Reason.NO_ENGINE_KNOWS_TYPE,
                            row.instances(), row.oldestEligibleAt()));
        }));
    }
}
