package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.MaintenanceSql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The garbage collector: settled instances older than the retention are deleted (their signals
 * with them), oldest first, sparing children whose parent is still live (its join reads them).
 * Counted by {@code durable.gc.deleted}.
 *
 * <p>Each batch also sweeps the next stretch of the signals, in id order and round again from the
 * start, for signals whose instance is gone: none should be, so finding one is logged as a warning
 * (a delete with triggers off, or what version 1 of the schema let a settle leave). And it deletes
 * the fleet's minutes of activity (durable_queue_minutes) past the same retention, uncounted.
 *
 * <p><b>Safe on all nodes</b>: each batch locks the rows it deletes with {@code FOR UPDATE SKIP
 * LOCKED}, so concurrent collectors split the backlog between them instead of deleting a row twice
 * or waiting on each other; a settled row never becomes live again, so nothing it decided on
 * changes under it.
 */
public final class GarbageCollector extends MaintenanceService {

    private static final Logger log = Loggers.getLogger(GarbageCollector.class);

    private final MaintenanceSql sql;
    private final long retentionMillis;
    /** The last signal id the orphan sweep looked at (0: start over). */
    private final AtomicLong swept = new AtomicLong();

    public GarbageCollector(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, MaintenanceSql sql,
            Duration retention) {
        super("gc", options, lane, timer, meters, "durable.gc.deleted");
        this.sql = sql;
        this.retentionMillis = retention.toMillis();
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.collectGarbage(retentionMillis, limit, timeout)
                .flatMap(deleted -> sweepOrphanSignals(limit, timeout).then(collectMinutes(limit, timeout))
                        .thenReturn(deleted));
    }

    private Mono<Void> collectMinutes(int limit, Duration timeout) {
        return sql.collectMinutes(retentionMillis, limit, timeout).then()
                .onErrorResume(error -> {
                    log.warn("gc: old minutes of activity not deleted: {}", error.toString());
                    return Mono.empty();
                });
    }

    private Mono<Void> sweepOrphanSignals(int limit, Duration timeout) {
        long after = swept.get();
        return sql.sweepOrphanSignals(after, limit, timeout).doOnNext(sweep -> {
                    swept.compareAndSet(after, sweep.lastSeen() == null ? 0 : sweep.lastSeen());
                    if (sweep.deleted() > 0) {
                        log.warn("gc: deleted {} signals whose instance was gone (a delete with triggers off?)",
                                sweep.deleted());
                    }
                })
                .then()
                // The batch's instances are deleted and counted whatever the sweep does; the next batch sweeps again.
                .onErrorResume(error -> {
                    log.warn("gc: the sweep for orphaned signals failed: {}", error.toString());
                    return Mono.empty();
                });
    }
}
