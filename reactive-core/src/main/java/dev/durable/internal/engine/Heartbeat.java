package dev.durable.internal.engine;

import dev.durable.internal.sql.LeaseSql;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * One queue's heartbeat: on every tick, one statement renews the lease of every row the scheduler
 * holds (buffered and running alike, so buffer depth never races the lease); the limiter's gate
 * slots are renewed on a tick of their own ({@link #renewSlots}), so a slow database never lets a
 * slot expire under a lease it renewed late. The answer says which rows are still this worker's and which of them
 * have a cancel requested, so the scheduler stops what it must not run. A failed beat is logged and
 * says nothing (the next tick tries again; the lease TTL is more than two beats, so one lost beat
 * loses no lease).
 */
final class Heartbeat implements Beat {

    private static final Logger log = Loggers.getLogger(Heartbeat.class);

    private final QueueContext queue;
    private final LeaseSql leases;
    private final Admission admission;

    Heartbeat(QueueContext queue, LeaseSql leases, Admission admission) {
        this.queue = queue;
        this.leases = leases;
        this.admission = admission;
    }

    @Override
    public Mono<Beat.Renewal> beat(List<Long> held) {
        if (held.isEmpty()) {
            return Mono.empty();
        }
        queue.counters().heartbeats.incrementAndGet();
        return leases.heartbeat(held, queue.worker(), queue.leaseMillis())
                .collectList()
                .map(rows -> {
                    Set<Long> renewed = new HashSet<>();
                    Set<Long> leftLocked = new HashSet<>();
                    Set<Long> cancelRequested = new HashSet<>();
                    for (LeaseSql.Renewed row : rows) {
                        (row.renewed() ? renewed : leftLocked).add(row.id());
                        if (row.cancelRequested()) {
                            cancelRequested.add(row.id());
                        }
                    }
                    if (rows.size() < held.size()) {
                        log.debug("queue {}: {} of {} held rows no longer owned", queue.queue(),
                                held.size() - rows.size(), held.size());
                    }
                    return new Beat.Renewal(renewed, leftLocked, cancelRequested);
                })
                .onErrorResume(error -> {
                    log.warn("queue {}: heartbeat failed: {}", queue.queue(), error.toString());
                    return Mono.empty();
                });
    }

    @Override
    public Mono<Void> renewSlots() {
        return admission.renew();
    }
}
