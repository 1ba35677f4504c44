package dev.durable.limit;

import dev.durable.internal.Db;
import dev.durable.internal.sql.LimiterSql;
import dev.durable.internal.sql.Tables;
import java.util.List;
import reactor.core.publisher.Mono;

/**
 * The gate slots the database shows held: the executing rows of a (gate, key, shard) whose lease is
 * live. A limiter that keeps its ledger outside the database rebuilds lost counters from this count
 * (a Redis that restarted empty), so the gate admits no one new until the holders it forgot have
 * renewed. A lapsed lease counts for nothing: the engine never renews one.
 */
public final class LiveGateClaims {

    private final LimiterSql sql;

    private LiveGateClaims(LimiterSql sql) {
        this.sql = sql;
    }

    /** Counts in the database and schema of the engine that made {@code context}. */
    public static LiveGateClaims of(LimiterContext context) {
        return new LiveGateClaims(new LimiterSql(new Db(context.connectionFactory(), context.callTimeout()),
                new Tables(context.schema())));
    }

    /**
     * How many live claims hold a slot of each counter, in one statement: one count per claim given,
     * for the counter of its gate, key and shard (claims without a gate are not allowed).
     */
    public Mono<List<Long>> count(List<LimitClaim> counters) {
        return Mono.defer(() -> {
            String[] gates = new String[counters.size()];
            String[] keys = new String[counters.size()];
            Integer[] shards = new Integer[counters.size()];
            for (int i = 0; i < counters.size(); i++) {
                LimitClaim claim = counters.get(i);
                if (claim.gate() == null) {
                    return Mono.error(new IllegalArgumentException("claim " + claim.id() + " holds no gate slot"));
                }
                gates[i] = claim.gate();
                keys[i] = claim.key();
                shards[i] = claim.shard();
            }
            return sql.liveGateClaims(gates, keys, shards);
        });
    }
}
