package dev.durable.limit;

import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.internal.sql.LimiterSql;
import dev.durable.internal.sql.Tables;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The default limiter: counters in PostgreSQL, next to the rows they count.
 *
 * <p>Admission is done by the pick statement itself (the engine's in-database admission): a row is
 * only ever claimed once its bucket and its gate counter admitted it, in the same transaction, so
 * {@link #admit} has nothing left to refuse and admits every claim it is given; {@link #draw} takes an
 * inline step's tokens from its bucket. Credit is done by
 * the {@code durable_gate_release} trigger the moment a gated row leaves executing (outcome,
 * release, reaper or a key change), so {@link #credit} has nothing to do; counters do not expire,
 * so neither does {@link #renew}. {@link #reconcile} recounts the counters from the executing rows
 * and the live permits under a lock that holds picks off. Permits ({@link #acquireSlots}) are rows of
 * {@code durable_limit_permits} counted on their gate's counter; an expired one is counted off by the
 * next acquire on its counter, by its own {@code renew()}, or by {@link #sweepPermits} on the bucket
 * sweeper's tick, whichever comes first (the reconcile as a last resort). Every permit statement locks
 * the gate counter before the permit rows, as the reconcile does (a table lock), so they cannot deadlock.
 */
public final class PostgresLimiter implements Limiter {

    private final LimiterSql sql;
    private final Map<String, Limits.RateLimit> rateLimits;
    private final Map<String, Limits.Window> windows;

    private PostgresLimiter(LimiterSql sql, Map<String, Limits.RateLimit> rateLimits,
            Map<String, Limits.Window> windows) {
        this.sql = sql;
        this.rateLimits = rateLimits;
        this.windows = windows;
    }

    /** The factory an engine uses by default. */
    public static LimiterFactory factory() {
        return new LimiterFactory() {
            @Override
            public Mono<Limiter> create(LimiterContext context) {
                return Mono.fromSupplier(() -> new PostgresLimiter(new LimiterSql(
                        new Db(context.connectionFactory(), context.callTimeout()), new Tables(context.schema())),
                        context.rateLimits(), context.windows()));
            }

            @Override
            public String toString() {
                return "postgres";
            }
        };
    }

    @Override
    public boolean admitsInPick() {
        return true;
    }

    /** Every claim: the pick that claimed it admitted it already. */
    @Override
    public Mono<Set<Long>> admit(List<LimitClaim> claims) {
        return Mono.just(claims.stream().map(LimitClaim::id).collect(Collectors.toUnmodifiableSet()));
    }

    /**
     * Takes the inline step's tokens from its bucket and its count from its window, all or nothing, in
     * one statement; a limit not configured here is refused.
     */
    @Override
    public Mono<Boolean> draw(LimitClaim claim) {
        WindowSlot slot = claim.window();
        if (slot == null) {
            return drawRateSlot(claim.rate());
        }
        Limits.@Nullable Window window = windows.get(slot.name());
        if (window == null) {
            return Mono.just(false);
        }
        RateSlot rate = claim.rate();
        if (rate == null) {
            return takeWindow(window, slot.partitionKey(), slot.weight());
        }
        Limits.@Nullable RateLimit limit = rateLimits.get(rate.name());
        if (limit == null) {
            return Mono.just(false);
        }
        return sql.drawStacked(limit, rate, window, slot);
    }

    /** A rate slot alone: its bucket's tokens, or the count of the window it names (as rows before stacked limits). */
    private Mono<Boolean> drawRateSlot(@Nullable RateSlot rate) {
        if (rate == null) {
            return Mono.just(true);
        }
        Limits.@Nullable Window window = windows.get(rate.name());
        if (window != null && !rateLimits.containsKey(rate.name())) {
            return takeWindow(window, rate.partitionKey(), rate.weight());
        }
        Limits.@Nullable RateLimit limit = rateLimits.get(rate.name());
        if (limit == null) {
            return Mono.just(false);
        }
        return sql.draw(limit.name(), rate.partitionKey(), rate.weight(), limit.burst(), limit.ratePerSecond());
    }

    /** A permit row beside the counter, counted on it (see {@code LimiterSql.acquireSlots}). */
    @Override
    public Mono<Boolean> acquireSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
            Duration lease) {
        return sql.acquireSlots(holder, gate.name(), key, shard, gate.shardCapacity(shard), slots, lease.toMillis());
    }

    @Override
    public Mono<Boolean> renewSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
            Duration lease) {
        return sql.renewSlots(holder, gate.name(), key, shard, lease.toMillis());
    }

    @Override
    public Mono<Void> releaseSlots(String holder, Limits.Gate gate, String key, int shard, int slots) {
        return sql.releaseSlots(holder, gate.name(), key, shard);
    }

    /** A bounded batch of expired permits counted off (see {@code LimiterSql.sweepPermits}). */
    @Override
    public Mono<Long> sweepPermits(int counters, java.time.Duration timeout) {
        return sql.sweepPermits(counters, timeout);
    }

    /** One statement on the window's row (see {@code LimiterSql.takeWindow}). */
    @Override
    public Mono<Boolean> takeWindow(Limits.Window window, String partition, int weight) {
        return sql.takeWindow(window.name(), partition, weight, window.slotMillis(), window.limit());
    }

    /** Nothing: the trigger credited the slot when the row left executing. */
    @Override
    public Mono<Void> credit(Collection<LimitClaim> claims) {
        return Mono.empty();
    }

    /** Nothing: counters are exact (trigger) and do not expire. */
    @Override
    public Mono<Long> renew(Collection<LimitClaim> claims) {
        return Mono.just(0L);
    }

    @Override
    public Mono<Long> reconcile() {
        return sql.reconcileGates();
    }

    @Override
    public String toString() {
        return "PostgresLimiter";
    }
}
