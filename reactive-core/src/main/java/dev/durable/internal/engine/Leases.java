package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.internal.sql.LeaseSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.limit.LimitClaim;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * One queue's claims that end without a run: rows given back unstarted (graceful shutdown, a row
 * claimed again by the worker still running it) and, at start, the reclaim of a dead predecessor's
 * rows. The heartbeat that keeps claims alive is {@link Heartbeat}; the reaper that recovers other
 * workers' expired claims is maintenance.
 */
final class Leases implements Releaser {

    private static final Logger log = Loggers.getLogger(Leases.class);
    private static final int RECLAIM_LIMIT = 10_000;
    private static final Duration RECLAIM_TIMEOUT = Duration.ofSeconds(30);

    private final QueueContext queue;
    private final String prefix;
    private final long heartbeatMillis;
    private final LeaseSql leases;
    private final LeaseSql.RetryDelay delays;
    private final Admission admission;
    private final Transitions transitions;

    Leases(QueueContext queue, String prefix, long heartbeatMillis, LeaseSql leases, LeaseSql.RetryDelay delays,
            Admission admission, Transitions transitions) {
        this.transitions = transitions;
        this.queue = queue;
        this.prefix = prefix;
        this.heartbeatMillis = heartbeatMillis;
        this.leases = leases;
        this.delays = delays;
        this.admission = admission;
    }

    /**
     * Gives claimed, unstarted rows back to runnable (undoing the attempt their claim took), then
     * their gate slots; a row whose cancel was requested meanwhile is settled cancelled, and said so.
     * A failure is logged: the rows' leases expire and the reaper returns them.
     */
    @Override
    public Mono<Void> release(List<ClaimedRow> rows) {
        if (rows.isEmpty()) {
            return Mono.empty();
        }
        List<Long> ids = rows.stream().map(ClaimedRow::id).toList();
        List<LimitClaim> held = admission.stopRenewing(ids);
        return leases.release(rows, queue.worker())
                .doOnNext(released -> {
                    if (released.status() == InstanceStatus.CANCELLED) {
                        transitions.cancelled(released.id(), released.type(), released.queue());
                    }
                })
                .count()
                .doOnNext(released -> {
                    queue.counters().released.addAndGet(released);
                    admission.credit(held);
                })
                .onErrorResume(error -> {
                    log.warn("queue {}: release of {} claimed rows failed, the reaper returns them: {}",
                            queue.queue(), ids.size(), error.toString());
                    return Mono.empty();
                })
                .then();
    }

    /**
     * Reclaims the stale claims of this scheduler's dead predecessors (same identity prefix, older
     * incarnation) at once. The margin spares any claim beaten within the last two heartbeats, so
     * a live owner that happens to share the prefix keeps its rows. A reclaimed row waits out its
     * backoff as a reaped one does (its run may be what killed the predecessor). Emits how many it
     * reclaimed.
     */
    Mono<Long> reclaim() {
        long margin = Math.max(queue.leaseMillis() - 2 * heartbeatMillis, 0);
        return leases.recoverExpired(margin, prefix, queue.worker(), RECLAIM_LIMIT, delays, RECLAIM_TIMEOUT)
                .doOnNext(recovery -> recovery.recovered().forEach(transitions::reclaimed))
                .map(recovery -> (long) recovery.recovered().size())
                .doOnNext(reclaimed -> {
                    if (reclaimed > 0) {
                        queue.counters().reclaimed.addAndGet(reclaimed);
                        log.info("queue {}: reclaimed {} rows of a dead predecessor of {}", queue.queue(), reclaimed,
                                prefix);
                    }
                });
    }
}
