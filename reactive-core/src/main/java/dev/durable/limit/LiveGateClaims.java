package dev.durable.limit;

import dev.durable.internal.Db;
import dev.durable.internal.sql.LimiterSql;
import dev.durable.internal.sql.Tables;
import reactor.core.publisher.Mono;

/**
 * The gate slots the database shows held: the executing rows of one (gate, key, shard) whose lease
 * is live. A limiter that keeps its ledger outside the database rebuilds it from this count when it
 * lost it (a Redis that restarted empty), so the gate admits no one new until the holders it forgot
 * have renewed. A lapsed lease counts for nothing: the engine never renews one.
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

    /** How many live claims hold a slot of {@code gate}'s counter for {@code key} and {@code shard}. */
    public Mono<Long> count(String gate, String key, int shard) {
        return sql.liveGateClaims(gate, key, shard);
    }
}
