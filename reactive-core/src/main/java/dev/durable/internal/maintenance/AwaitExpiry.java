package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.MaintenanceSql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import dev.durable.internal.engine.Transitions;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The expiry of await deadlines: parked instances whose deadline passed with no awaited signal
 * resume (their step sees the timeout), and their queues are poked.
 *
 * <p><b>Safe on all nodes</b>: each batch locks the rows it resumes with {@code FOR UPDATE SKIP
 * LOCKED}, and a row another node (or a signal delivery) is changing is skipped and, once changed,
 * no longer parked, so no row is resumed twice and a delivery never races an expiry into two wakes.
 */
public final class AwaitExpiry extends MaintenanceService {

    private final MaintenanceSql sql;
    private final Transitions transitions;

    public AwaitExpiry(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, MaintenanceSql sql,
            Transitions transitions) {
        super("await_expiry", options, lane, timer, meters, "durable.awaits.expired");
        this.sql = sql;
        this.transitions = transitions;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.expireAwaits(limit, timeout).map(expired -> {
            expired.forEach(transitions::awaitExpired);
            return (long) expired.size();
        });
    }
}
