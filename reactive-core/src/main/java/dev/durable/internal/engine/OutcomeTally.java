package dev.durable.internal.engine;

import dev.durable.internal.sql.QueueActivitySql;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * This engine's committed outcomes per queue, counted in memory as they commit (a run pays an
 * increment, never a statement) and added to the fleet's minutes (durable_queue_minutes) by a flush
 * every interval, one statement for all queues. A flush that fails puts its counts back for the
 * next one; close flushes what is left.
 */
public final class OutcomeTally {

    private static final Logger log = Loggers.getLogger(OutcomeTally.class);

    /** What is counted, in the order of the table's columns. */
    enum Outcome { COMPLETED, FAILED, RETRIED, CANCELLED, REAPED }

    private static final int OUTCOMES = Outcome.values().length;

    private final Map<String, LongAdder[]> byQueue = new ConcurrentHashMap<>();
    /** The flush loop of the running engine (an engine that is closed and started again starts a new one). */
    private volatile Disposable loop = Disposables.disposed();

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

    /** Flushes into {@code sql} every {@code interval} until {@link #stop}. */
    void start(QueueActivitySql sql, Duration interval, Scheduler timer) {
        loop.dispose();
        loop = Flux.interval(interval, interval, timer)
                .onBackpressureDrop()
                .concatMap(tick -> flush(sql), 0)
                .subscribe(null, error -> log.error("outcome tally's flush loop failed", error));
    }

    /** Stops the loop and flushes what is left, within {@code bound}. */
    Mono<Void> stop(QueueActivitySql sql, Duration bound) {
        return Mono.defer(() -> {
            loop.dispose();
            return flush(sql).timeout(bound, Mono.empty());
        });
    }

    /**
     * Adds the counts since the last flush to the current minute's rows. The counts are taken out
     * first (a run counted meanwhile waits for the next flush) and put back when the statement fails.
     */
    Mono<Void> flush(QueueActivitySql sql) {
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
            return sql.add(queues, columns[0], columns[1], columns[2], columns[3], columns[4])
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
