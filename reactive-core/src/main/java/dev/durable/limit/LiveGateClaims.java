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
     * How many live claims hold a slot of each counter, in one statement: one count per slot given,
     * for the counter of its gate, key and shard.
     */
    public Mono<List<Long>> count(List<GateSlot> counters) {
        return Mono.defer(() -> sql.liveGateClaims(counters.stream().map(GateSlot::name).toArray(String[]::new),
                counters.stream().map(GateSlot::key).toArray(String[]::new),
                counters.stream().map(GateSlot::shard).toArray(Integer[]::new)));
    }
}
