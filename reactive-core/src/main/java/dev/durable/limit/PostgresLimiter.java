package dev.durable.limit;

import dev.durable.internal.Db;
import dev.durable.internal.sql.LimiterSql;
import dev.durable.internal.sql.Tables;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import reactor.core.publisher.Mono;

/**
 * The default limiter: counters in PostgreSQL, next to the rows they count.
 *
 * <p>Admission is done by the pick statement itself ({@code PickSql.pickWithLimits}): a row is only
 * ever claimed once its bucket and its gate counter admitted it, in the same transaction, so
 * {@link #admit} has nothing left to refuse and admits every claim it is given. Credit is done by
 * the {@code durable_gate_release} trigger the moment a gated row leaves executing (outcome,
 * release, reaper or a key change), so {@link #credit} has nothing to do; counters do not expire,
 * so neither does {@link #renew}. {@link #reconcile} recounts the counters from the executing rows
 * under a lock that holds picks off.
 */
public final class PostgresLimiter implements Limiter {

    private final LimiterSql sql;

    private PostgresLimiter(LimiterSql sql) {
        this.sql = sql;
    }

    /** The factory an engine uses by default. */
    public static LimiterFactory factory() {
        return new LimiterFactory() {
            @Override
            public Mono<Limiter> create(LimiterContext context) {
                return Mono.fromSupplier(() -> new PostgresLimiter(new LimiterSql(
                        new Db(context.connectionFactory(), context.callTimeout()), new Tables(context.schema()))));
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
