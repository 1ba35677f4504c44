package dev.durable.internal.maintenance;

import dev.durable.InstanceStatus;
import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.LeaseSql;
import dev.durable.internal.sql.LeaseSql.RetryDelay;
import dev.durable.internal.sql.Rows.Transition;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import dev.durable.internal.engine.Transitions;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The reaper: claims whose lease expired (their worker died or lost the database) go back to
 * runnable once the type's backoff for the lost attempt has passed, so a job that kills its worker
 * does not hop from node to node at reaper speed; past max attempts they fail, so it cannot retry
 * for ever; with a cancel requested they end cancelled. The error names the lost worker. Parents
 * that a recovered child woke (its failure was their last child) are reported, so their queues are
 * poked rather than left to the poll. A type this node does not know gets the default backoff.
 *
 * <p><b>Safe on all nodes</b>, not elected: each batch locks the rows it recovers with
 * {@code FOR UPDATE SKIP LOCKED} in one transaction, so two reapers never take the same row (the
 * second skips it, then finds it no longer executing), and a row's owner cannot renew or commit
 * it meanwhile (its heartbeat and commit wait for the lock, then find the row no longer claimed
 * by it). Several reapers share a large backlog instead of queueing behind one.
 */
public final class Reaper extends MaintenanceService {

    private static final Logger log = Loggers.getLogger(Reaper.class);

    private final LeaseSql leases;
    private final RetryDelay delays;
    private final Transitions transitions;
    /** The ledger rows the last batch looked at: a full batch of them may have left more to look at. */
    private final AtomicLong claimsLookedAt = new AtomicLong();

    public Reaper(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, LeaseSql leases,
            RetryDelay delays, Transitions transitions) {
        super("reaper", options, lane, timer, meters, null); // durable.reaped is counted per queue by telemetry
        this.leases = leases;
        this.delays = delays;
        this.transitions = transitions;
    }

    @Override
    protected boolean full(long count) {
        return super.full(count) || super.full(claimsLookedAt.get());
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return leases.recoverExpired(0, null, "", limit, delays, timeout).map(recovery -> {
            for (Transition recovered : recovery.recovered()) {
                if (recovered.status() == InstanceStatus.FAILED) {
                    log.warn("instance {} failed: its worker was lost on its last attempt", recovered.id());
                }
                transitions.recovered(recovered);
            }
            recovery.wokenParents().forEach(transitions::wokenParent);
            claimsLookedAt.set(recovery.claimsLookedAt());
            return (long) recovery.recovered().size();
        });
    }
}
