package dev.durable.internal.maintenance;

import dev.durable.Limits;
import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.MaintenanceSql;
import dev.durable.limit.Limiter;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The sweep of idle rate-limit buckets: one bucket row exists per limit and partition that was ever
 * used (per tenant, say), and without a sweep they would live for ever. A bucket is deleted once it
 * has been full again for {@link #IDLE}: tokens + rate × idle time ≥ burst. The next pick that needs
 * it creates it full, which is exactly what it would have found, so deleting it changes no admission
 * decision. Only the rate limits this engine knows are swept (it knows their rate and burst), and
 * only when the limiter admits in the database (PostgreSQL); another limiter keeps no buckets here.
 * Counted by {@code durable.buckets.swept}. Expired gate permits of the limiter are counted off on the
 * same tick ({@link Limiter#sweepPermits}).
 *
 * <p><b>Safe on all nodes</b>: each batch locks the buckets it deletes with {@code FOR UPDATE SKIP
 * LOCKED} and re-checks them after the lock, so a bucket a pick is drawing from is skipped, and two
 * sweepers never delete the same row.
 */
public final class BucketSweeper extends MaintenanceService {

    /**
     * How long a bucket must already have been full: longer than any pick statement runs, so even a
     * pick whose clock started before the sweep finds it full at its own now().
     */
    static final Duration IDLE = Duration.ofMinutes(1);

    private final MaintenanceSql sql;
    private final Collection<Limits.RateLimit> rateLimits;
    private final Limiter limiter;

    /**
     * {@code rateLimits}: the limits to sweep; empty when the limiter keeps no buckets in the database.
     * {@code limiter}: whose expired permits are counted off on the same tick.
     */
    public BucketSweeper(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, MaintenanceSql sql,
            Collection<Limits.RateLimit> rateLimits, Limiter limiter) {
        super("bucket_sweeper", options, lane, timer, meters, "durable.buckets.swept");
        this.sql = sql;
        this.rateLimits = List.copyOf(rateLimits);
        this.limiter = limiter;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        // Idle sliding windows too (PostgreSQL limiter only; Redis's expire by themselves, its table stays empty).
        // And expired permits (engine.limits()): their slots must not hold a gate's jobs back until the
        // next acquire on their counter or the reconcile.
        return sql.sweepBuckets(rateLimits, IDLE.toMillis(), limit, timeout)
                .zipWith(sql.sweepWindows(limit, timeout), Long::sum)
                .zipWith(limiter.sweepPermits(limit, timeout).timeout(timeout), Long::sum);
    }
}
