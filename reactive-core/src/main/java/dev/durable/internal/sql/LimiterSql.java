package dev.durable.internal.sql;

import dev.durable.internal.Db;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The limiters' own statements. The PostgreSQL limiter admits inside the pick ({@link PickSql}) and
 * credits in the {@code durable_gate_release} trigger; this draws the tokens of inline steps (which
 * no pick admits), heals its counters, and counts the live claims of a gate for a limiter that keeps
 * its ledger elsewhere and lost it.
 */
public final class LimiterSql {

    /**
     * Holds picks off the gate counters for {@link #reconcileGates}. Index: none. Locks: the
     * counters table in EXCLUSIVE mode to the end of the transaction: picks that admit a gate wait,
     * readers go on.
     */
    private final String lockGates;

    /**
     * Recounts every gate counter from the executing rows and drops empty counters; emits how many
     * were wrong. The trigger keeps counters exact, this heals manual edits and restores.
     * Index: the counters' primary key; executing rows through the lease index. Locks: the counters,
     * which {@link #lockGates} already holds, so the count cannot race a pick.
     */
    private final String reconcileGates;

    /**
     * Draws $3 tokens from the bucket of rate limit $1, partition $2 (burst $4, $5 tokens a second)
     * for an inline step, which runs on its claim with no pick to admit it: takes them and returns a
     * row when the bucket, refilled as the pick refills it ({@link PickSql#REFILLED}), affords them;
     * else returns nothing and leaves the bucket as it was. A bucket not there yet is full.
     * Index: the buckets' primary key. Locks: the bucket row, to the end of the statement.
     */
    private final String draw;

    /**
     * Counts the live claims of gate $1, key $2, shard $3: executing rows whose lease has not run out
     * (a lapsed lease can no longer be renewed, so it holds no slot). What a lease-native limiter
     * rebuilds a lost ledger from. Index: the executing rows' partial index
     * ({@code durable_instances_executing_idx}), a handful of rows; filtered on the gate. Locks: none.
     */
    private final String liveGateClaims;

    private final Db db;

    public LimiterSql(Db db, Tables tables) {
        this.db = db;
        this.draw = tables.render("""
                INSERT INTO {buckets} AS b (name, partition_key, tokens, refilled_at, taken)
                SELECT $1::text, $2::text, $4::float8 - $3::int, now(), $3::int WHERE $3::int <= $4::float8
                ON CONFLICT (name, partition_key) DO UPDATE
                   SET tokens = {refilled} - $3, taken = $3, refilled_at = greatest(b.refilled_at, now())
                 WHERE {refilled} >= $3
                RETURNING b.name""").replace("{refilled}", PickSql.REFILLED.formatted("$4::float8", "$5::float8"));
        this.lockGates = tables.render("LOCK TABLE {gate_slots} IN EXCLUSIVE MODE");
        this.liveGateClaims = tables.render("""
                SELECT count(*) FROM {instances}
                 WHERE status = 'executing' AND gate_name = $1 AND concurrency_key = $2 AND gate_shard = $3
                   AND lease_expires_at > now()""");
        this.reconcileGates = tables.render("""
                WITH counted AS (
                    SELECT s.gate, s.key, s.shard, count(i.id) AS executing
                      FROM {gate_slots} s
                      LEFT JOIN {instances} i
                        ON i.status = 'executing' AND i.gate_name = s.gate AND i.concurrency_key = s.key
                       AND i.gate_shard = s.shard
                     GROUP BY s.gate, s.key, s.shard
                ), healed AS (
                    UPDATE {gate_slots} s SET held = c.executing
                      FROM counted c
                     WHERE (s.gate, s.key, s.shard) = (c.gate, c.key, c.shard) AND c.executing > 0
                       AND s.held <> c.executing
                    RETURNING s.gate
                ), emptied AS (
                    DELETE FROM {gate_slots} s USING counted c
                     WHERE (s.gate, s.key, s.shard) = (c.gate, c.key, c.shard) AND c.executing = 0
                    RETURNING s.held
                )
                SELECT (SELECT count(*) FROM healed) + (SELECT count(*) FROM emptied WHERE held <> 0)""");
    }

    /** Draws {@code weight} tokens for an inline step; emits whether the bucket afforded them. */
    public Mono<Boolean> draw(String rateLimit, String partition, int weight, int burst, double ratePerSecond) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(draw)
                                .bind(0, rateLimit).bind(1, partition).bind(2, weight).bind(3, burst)
                                .bind(4, ratePerSecond).execute())
                        .concatMap(result -> result.map(row -> true)))
                .hasElements();
    }

    /** Recounts the gate counters under a lock that holds picks off; emits how many were wrong. */
    public Mono<Long> reconcileGates() {
        return db.inTransaction(connection -> Flux.from(connection.createStatement(lockGates).execute())
                        .concatMap(result -> result.getRowsUpdated())
                        .thenMany(Flux.from(connection.createStatement(reconcileGates).execute()))
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .single();
    }

    /** The live claims of one gate counter; see {@link #liveGateClaims}. */
    public Mono<Long> liveGateClaims(String gate, String key, int shard) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(liveGateClaims)
                                .bind(0, gate).bind(1, key).bind(2, shard).execute())
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .single();
    }
}
