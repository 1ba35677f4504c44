package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.MaintenanceSql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The garbage collector: settled instances older than the retention are deleted with their
 * signals, oldest first, sparing children whose parent is still live (its join reads them).
 * Counted by {@code durable.gc.deleted}.
 *
 * <p><b>Safe on all nodes</b>: each batch locks the rows it deletes with {@code FOR UPDATE SKIP
 * LOCKED}, so concurrent collectors split the backlog between them instead of deleting a row twice
 * or waiting on each other; a settled row never becomes live again, so nothing it decided on
 * changes under it.
 */
public final class GarbageCollector extends MaintenanceService {

    private final MaintenanceSql sql;
    private final long retentionMillis;

    public GarbageCollector(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, MaintenanceSql sql,
            Duration retention) {
        super("gc", options, lane, timer, meters, "durable.gc.deleted");
        this.sql = sql;
        this.retentionMillis = retention.toMillis();
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.collectGarbage(retentionMillis, limit, timeout);
    }
}
