package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.FairSql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The repair of fair keys, so the fair pick's cost never grows with idle keys: the pick parks a
 * key in which it sees no rows, and a row a transaction inserted while still open (an outbox
 * insert, say) commits after the key was parked for good; its insert found the key active and
 * left it alone. Each pass walks the keys parked for good, a batch at a time in key order from
 * where the last batch stopped, and wakes those holding a runnable row (counted by
 * {@code durable.fair.keys.healed}). Before that, once per engine start, it gives the empty key to
 * keyless runnable rows of the queues this engine runs fair (queued before the queue was fair): the
 * fair pick reads keyed rows only; and it drops the per-key cap gate ({@code Fairness.capGate})
 * from the rows of queues this engine runs without that cap (removed, or fairness turned off),
 * which no engine would admit any more. Heals keys only on engines that run a fair queue.
 *
 * <p><b>Safe on all nodes</b>: both statements lock what they change {@code FOR UPDATE SKIP LOCKED}
 * and re-check it under the lock; waking a key twice or one a pick just woke changes nothing.
 */
public final class FairKeyHealer extends MaintenanceService {

    private final FairSql sql;
    private final List<String> fairQueues;
    private final List<String> uncappedQueues;
    private volatile boolean uncapped;
    private volatile boolean backfilled;
    private volatile boolean more;
    private volatile String afterQueue = "";
    private volatile String afterKey = "";

    /**
     * {@code fairQueues}: the queues this engine runs fair; {@code uncappedQueues}: the queues it runs
     * without their per-key cap gate, whose rows lose that gate once per start (written while the
     * cap was on, no engine would admit them). Neither switches the task off.
     */
    public FairKeyHealer(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, FairSql sql,
            Set<String> fairQueues, Set<String> uncappedQueues) {
        super("fair_key_healer", options, lane, timer, meters, "durable.fair.keys.healed");
        this.sql = sql;
        this.fairQueues = List.copyOf(fairQueues);
        this.uncappedQueues = List.copyOf(uncappedQueues);
        this.uncapped = uncappedQueues.isEmpty();
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        if (!uncapped) {
            return sql.uncap(uncappedQueues, limit, timeout).doOnNext(count -> {
                uncapped = count < limit;
                more = true;
            }).map(count -> 0L);
        }
        if (fairQueues.isEmpty()) {
            more = false;
            return Mono.just(0L);
        }
        if (!backfilled) {
            return sql.backfill(fairQueues, limit, timeout).doOnNext(count -> {
                backfilled = count < limit;
                // Keyed so far; the heal runs in the same pass.
                more = true;
            }).map(count -> 0L);
        }
        return sql.heal(limit, afterQueue, afterKey, timeout).map(healed -> {
            more = healed.scanned() >= limit;
            // A short batch reached the end: the next pass starts over.
            afterQueue = more ? healed.lastQueue() : "";
            afterKey = more ? healed.lastKey() : "";
            return healed.woken();
        });
    }

    @Override
    protected boolean full(long count) {
        return more;
    }
}
