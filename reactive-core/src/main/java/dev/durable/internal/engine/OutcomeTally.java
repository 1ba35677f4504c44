package dev.durable.internal.engine;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * This engine's committed outcomes per queue, counted in memory as they commit (a run pays an
 * increment, never a statement) and added to the fleet's minutes (durable_queue_minutes) by a flush
 * every interval, one statement for all queues. A flush that fails puts its counts back for the
 * next one; stopping lets the flush in flight finish and flushes what is left. Best effort both
 * ways: an engine killed outright loses what it counted since its last flush, and a flush whose
 * statement committed but whose answer timed out is counted again by the next.
 */
public final class OutcomeTally {

    private static final Logger log = Loggers.getLogger(OutcomeTally.class);

    /** What is counted, in the order of the table's columns. */
    enum Outcome { COMPLETED, FAILED, RETRIED, CANCELLED, REAPED }

    private static final int OUTCOMES = Outcome.values().length;

    /** Where a flush adds its counts: one value per queue in each array ({@code QueueActivitySql::add}). */
    @FunctionalInterface
    interface Store {
        Mono<Void> add(String[] queues, Long[] completed, Long[] failed, Long[] retried, Long[] cancelled,
                Long[] reaped);
    }

    private final Map<String, LongAdder[]> byQueue = new ConcurrentHashMap<>();
    /** Ends the running engine's flush loop (an engine closed and started again starts a new one). */
    private volatile Sinks.One<Boolean> stopped = Sinks.one();
    private volatile Mono<Void> loop = Mono.empty();

    void count(String queue, Outcome outcome) {
        adders(queue)[outcome.ordinal()].increment();
    }

    private LongAdder[] adders(String queue) {
        return byQueue.computeIfAbsent(queue, q -> {
            LongAdder[] adders = new LongAdder[OUTCOMES];
            for (int i = 0; i < OUTCOMES; i++) {
                adders[i] = new LongAdder();
            }
            return adders;
        });
    }

    /** Flushes into {@code store} every {@code interval} until {@link #stop}. */
    void start(Store store, Duration interval, Scheduler timer) {
        Sinks.One<Boolean> stop = Sinks.one();
        stopped = stop;
        // A tick after the stop is not taken; a flush already running finishes (concatMap is not cancelled).
        Mono<Void> running = Flux.interval(interval, interval, timer)
                .onBackpressureDrop()
                .takeUntilOther(stop.asMono())
                .concatMap(tick -> flush(store), 0)
                .then()
                .cache();
        loop = running;
        running.subscribe(null, error -> log.error("outcome tally's flush loop failed", error));
    }

    /** Stops the loop, waits for its flush in flight, and flushes what is left, within {@code bound}. */
    Mono<Void> stop(Store store, Duration bound) {
        return Mono.defer(() -> {
            stopped.tryEmitValue(true);
            return loop.then(flush(store));
        }).timeout(bound, Mono.fromRunnable(() -> log.warn(
                "outcome counts not flushed within {} at close: durable_queue_minutes misses them", bound)));
    }

    /**
     * Adds the counts since the last flush to the current minute's rows. The counts are taken out
     * first (a run counted meanwhile waits for the next flush) and put back when the statement fails.
     */
    Mono<Void> flush(Store store) {
        return Mono.defer(() -> {
            Map<String, long[]> taken = take();
            if (taken.isEmpty()) {
                return Mono.empty();
            }
            int n = taken.size();
            String[] queues = taken.keySet().toArray(new String[0]);
            Long[][] columns = new Long[OUTCOMES][n];
            List<long[]> values = new ArrayList<>(taken.values());
            for (int q = 0; q < n; q++) {
                for (int o = 0; o < OUTCOMES; o++) {
                    columns[o][q] = values.get(q)[o];
                }
            }
            return store.add(queues, columns[0], columns[1], columns[2], columns[3], columns[4])
                    .onErrorResume(error -> {
                        giveBack(taken);
                        log.warn("outcome counts not added to durable_queue_minutes (kept for the next flush): {}",
                                error.toString());
                        return Mono.empty();
                    });
        });
    }

    /** The counts since the last take, per queue in name order; queues with nothing new left out. */
    private Map<String, long[]> take() {
        Map<String, long[]> taken = new TreeMap<>();
        byQueue.forEach((queue, adders) -> {
            // Each adder's cells are swapped for zero one by one: an increment meanwhile is taken or stays.
            long[] counts = new long[OUTCOMES];
            boolean any = false;
            for (int i = 0; i < OUTCOMES; i++) {
                counts[i] = adders[i].sumThenReset();
                any |= counts[i] != 0;
            }
            if (any) {
                taken.put(queue, counts);
            }
        });
        return taken;
    }

    private void giveBack(Map<String, long[]> taken) {
        taken.forEach((queue, counts) -> {
            LongAdder[] adders = adders(queue);
            for (int i = 0; i < OUTCOMES; i++) {
                adders[i].add(counts[i]);
            }
        });
    }
}
