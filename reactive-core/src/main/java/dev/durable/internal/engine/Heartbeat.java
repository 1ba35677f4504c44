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

    private final String queue;
    private final String worker;
    private final long leaseMillis;
    private final LeaseSql leases;
    private final Admission admission;
    private final SchedulerCounters counters;

    Heartbeat(String queue, String worker, long leaseMillis, LeaseSql leases, Admission admission,
            SchedulerCounters counters) {
        this.queue = queue;
        this.worker = worker;
        this.leaseMillis = leaseMillis;
        this.leases = leases;
        this.admission = admission;
        this.counters = counters;
    }

    @Override
    public Mono<Void> beat(List<Long> held) {
        if (held.isEmpty()) {
            return Mono.empty();
        }
        counters.heartbeats.incrementAndGet();
        Mono<Void> renewLeases = leases.heartbeat(held, worker, leaseMillis)
                .doOnNext(renewed -> {
                    if (renewed < held.size()) {
                        log.debug("queue {}: {} of {} held rows no longer owned", queue, held.size() - renewed, held.size());
                    }
                })
                .onErrorResume(error -> {
                    log.warn("queue {}: heartbeat failed: {}", queue, error.toString());
                    return Mono.empty();
                })
                .then();
        return Mono.when(renewLeases, admission.renew());
    }
}
