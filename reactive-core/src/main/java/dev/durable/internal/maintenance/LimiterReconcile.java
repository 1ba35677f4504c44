package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.limit.Limiter;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The limiter's healing of its counters after crashes, manual edits or restores (PostgreSQL:
 * gate counters recounted from the executing rows). One call per pass: it has no batches, and its
 * batch size and budget do not apply. Counted by {@code durable.limits.healed}.
 *
 * <p><b>Safe on all nodes</b>: the PostgreSQL limiter recounts under an exclusive lock on the
 * counters, so two reconciles run one after the other and each writes the true count; a lease-native
 * limiter (Redis) heals by expiry and its reconcile is idempotent. On a long interval (5 minutes by
 * default) the repeat across nodes costs little.
 */
public final class LimiterReconcile extends MaintenanceService {

    private static final Logger log = Loggers.getLogger(LimiterReconcile.class);

    private final Limiter limiter;

    public LimiterReconcile(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, Limiter limiter) {
        super("limiter_reconcile", options, lane, timer, meters, "durable.limits.healed");
        this.limiter = limiter;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return limiter.reconcile().doOnNext(wrong -> {
            if (wrong > 0) {
                log.warn("reconcile healed {} limiter counters", wrong);
            }
        });
    }

    @Override
    protected boolean full(long count) {
        return false;
    }
}
