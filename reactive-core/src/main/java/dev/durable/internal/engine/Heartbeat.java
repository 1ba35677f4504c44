package dev.durable.internal.engine;

import dev.durable.internal.sql.LeaseSql;
import java.util.List;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * One queue's heartbeat: on every tick, one statement renews the lease of every row the scheduler
 * holds (buffered and running alike, so buffer depth never races the lease), and the limiter's gate
 * slots are renewed beside it. A failed beat is logged and the next tick tries again; the lease TTL
 * is more than two beats, so one lost beat loses no lease.
 */
final class Heartbeat implements QueueScheduler.Beat {

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
    public Mono<Void> beat(List<Long> held) {
        if (held.isEmpty()) {
            return Mono.empty();
        }
        queue.counters().heartbeats.incrementAndGet();
        Mono<Void> renewLeases = leases.heartbeat(held, queue.worker(), queue.leaseMillis())
                .doOnNext(renewed -> {
                    if (renewed < held.size()) {
                        log.debug("queue {}: {} of {} held rows no longer owned", queue.queue(), held.size() - renewed, held.size());
                    }
                })
                .onErrorResume(error -> {
                    log.warn("queue {}: heartbeat failed: {}", queue.queue(), error.toString());
                    return Mono.empty();
                })
                .then();
        return Mono.when(renewLeases, admission.renew());
    }
}
