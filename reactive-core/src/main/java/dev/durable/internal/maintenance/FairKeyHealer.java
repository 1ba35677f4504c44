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
 * {@code durable.fair.keys.healed}). After that, on each pass until it found none once (scans
 * without an index, so not for ever), it drops the per-key cap gate ({@code Fairness.capGate}) from
 * the rows of queues this engine runs without that cap (removed, or fairness turned off), which no
 * engine would admit any more, until no row holds it, executing ones included; and it gives the
 * empty key to keyless runnable rows of the queues this engine runs fair (queued before the queue
 * was fair), once per engine start: the fair pick reads keyed rows only. Keys are healed and rows
 * keyed only on engines that run a fair queue; the cap gate is dropped by any engine that runs the
 * queue without it.
 *
 * <p><b>Safe on all nodes</b>: its statements lock what they change {@code FOR UPDATE SKIP LOCKED}
 * and re-check it under the lock; waking a key twice or one a pick just woke changes nothing.
 */
public final class FairKeyHealer extends MaintenanceService {

    private final FairSql sql;
    private final List<String> fairQueues;
    private final List<String> uncappedQueues;
    private volatile boolean uncapped;
    private volatile boolean backfilled;
    private volatile boolean more;
    /** The phase the next batch runs: 0 heal, 1 uncap, 2 backfill. */
    private volatile int phase;
    private volatile String afterQueue = "";
    private volatile String afterKey = "";

    /**
     * {@code fairQueues}: the queues this engine runs fair; {@code uncappedQueues}: the queues it runs
     * without their per-key cap gate, whose rows lose that gate (written while the cap was on, no
     * engine would admit them), from engine start until none holds it, executing ones included.
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
        // A pass goes through the phases in order, batch by batch: the heal first (indexed, the one
        // that must never be starved), then the scans. A failed batch ends the pass; the next starts over.
        return phase(limit, timeout).doOnError(error -> phase = 0);
    }

    private Mono<Long> phase(int limit, Duration timeout) {
        if (phase == 0) {
            if (fairQueues.isEmpty()) {
                phase = 1;
                return phase(limit, timeout);
            }
            return sql.heal(limit, afterQueue, afterKey, timeout).map(healed -> {
                boolean full = healed.scanned() >= limit;
                // A short batch reached the end: the next pass starts over.
                afterQueue = full ? healed.lastQueue() : "";
                afterKey = full ? healed.lastKey() : "";
                if (!full) {
                    phase = 1;
                }
                more = true;
                return healed.woken();
            });
        }
        if (phase == 1) {
            if (uncapped) {
                phase = 2;
                return phase(limit, timeout);
            }
            return sql.uncap(uncappedQueues, limit, timeout).map(batch -> {
                if (batch.changed() < limit) {
                    // Done once no row holds the gate: an executing one may yet be retried under it.
                    uncapped = !batch.executing();
                    phase = 2;
                }
                more = true;
                return 0L;
            });
        }
        if (backfilled || fairQueues.isEmpty()) {
            phase = 0;
            more = false;
            return Mono.just(0L);
        }
        return sql.backfill(fairQueues, limit, timeout).map(count -> {
            if (count < limit) {
                backfilled = true;
                phase = 0;
                more = false;
            } else {
                more = true;
            }
            return 0L;
        });
    }

    @Override
    protected boolean full(long count) {
        return more;
    }
}
