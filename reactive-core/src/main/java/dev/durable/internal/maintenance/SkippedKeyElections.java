package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.KeySql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The elections that gave up: a key's election waits a bounded time for the key's lock (migration
 * 16), so a transaction that holds it for long (a caller's open transaction that inserted under the
 * key) cannot stall the statement that needs the election. The key is written down instead, and
 * this service elects it once the lock is free, a batch of keys at a time (counted by
 * {@code durable.keys.healed}, with the {@link KeyHealer}'s); the queues of the new heads are poked.
 * Its list is short and indexed, so it runs often (every second by default) where the healer's
 * walk over every waiting key runs rarely.
 *
 * <p><b>Safe on all nodes</b>: engines share the list with {@code SKIP LOCKED}, and a key is
 * elected under its election lock taken with a try (a held one stays on the list).
 */
public final class SkippedKeyElections extends MaintenanceService {

    private final KeySql sql;
    private final Consumer<String> poke;
    private volatile boolean more;

    /** {@code poke}: told each queue in which a head was elected, once the batch committed. */
    public SkippedKeyElections(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, KeySql sql,
            Consumer<String> poke) {
        super("skipped_key_elections", options, lane, timer, meters, "durable.keys.healed");
        this.sql = sql;
        this.poke = poke;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.retrySkipped(limit, timeout).map(healed -> {
            // A full batch may have left entries behind; keys still locked are stepped over, listed for the next tick.
            more = healed.scanned() >= limit;
            healed.queues().forEach(poke);
            return healed.elected();
        });
    }

    @Override
    protected boolean full(long count) {
        return more;
    }
}
