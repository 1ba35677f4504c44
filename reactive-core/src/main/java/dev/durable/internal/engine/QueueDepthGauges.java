package dev.durable.internal.engine;

import dev.durable.admin.QueueDepth;
import dev.durable.internal.sql.QueueActivitySql;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The {@code durable.queue.depth} and {@code durable.queue.age} gauges: each queue's rows due now and
 * how long the oldest has waited, read from the database every {@value #HEARTBEATS} heartbeat
 * intervals. Fleet-wide figures, the same on every engine: for every queue with due rows, and 0 for
 * the queues this engine serves that have none. A loop of its own, so a slow count on a big backlog
 * delays nothing else.
 */
final class QueueDepthGauges {

    private static final Logger log = Loggers.getLogger(QueueDepthGauges.class);
    /** How many heartbeat intervals between two reads (30 s by default): a read counts the due rows. */
    static final int HEARTBEATS = 6;

    private final QueueActivitySql sql;
    private final List<String> served;
    private final Scheduler timer;
    private final MultiGauge depth;
    private final MultiGauge age;
    private final Disposable.Swap loop = Disposables.swap();

    QueueDepthGauges(QueueActivitySql sql, List<String> served, MeterRegistry meters, Scheduler timer) {
        this.sql = sql;
        this.served = served;
        this.timer = timer;
        this.depth = MultiGauge.builder("durable.queue.depth")
                .description("rows due now and not started, fleet-wide (runnable, not waiting behind their key)")
                .register(meters);
        this.age = MultiGauge.builder("durable.queue.age").baseUnit("seconds")
                .description("how long the oldest row due now has waited, fleet-wide")
                .register(meters);
    }

    /** Reads every {@code interval}, the first one interval after the start, until {@link #stop}. */
    void start(Duration interval) {
        loop.update(Flux.interval(interval, interval, timer)
                .onBackpressureDrop()
                .concatMap(tick -> measure().onErrorResume(error -> {
                    log.warn("queue depths not read (the gauges keep their last values): {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("queue depth loop failed", error)));
    }

    void stop() {
        loop.dispose();
    }

    private Mono<Void> measure() {
        return sql.depths().collectList().doOnNext(depths -> {
            Map<String, QueueDepth> byQueue = new LinkedHashMap<>();
            served.forEach(queue -> byQueue.put(queue, null));
            depths.forEach(row -> byQueue.put(row.queue(), row));
            List<MultiGauge.Row<?>> due = new ArrayList<>();
            List<MultiGauge.Row<?>> waited = new ArrayList<>();
            byQueue.forEach((queue, row) -> {
                due.add(MultiGauge.Row.of(Tags.of("queue", queue), row == null ? 0 : row.due()));
                waited.add(MultiGauge.Row.of(Tags.of("queue", queue), row == null ? 0 : row.oldestWait().toMillis() / 1000.0));
            });
            depth.register(due, true);
            age.register(waited, true);
        }).then();
    }
}
