package dev.durable.internal.sql;

import dev.durable.internal.Db;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The PostgreSQL limiter's own statements. Admission itself happens inside the pick
 * ({@link PickSql}) and credit in the {@code durable_gate_release} trigger; this heals counters.
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

    private final Db db;

    public LimiterSql(Db db, Tables tables) {
        this.db = db;
        this.lockGates = tables.render("LOCK TABLE {gate_slots} IN EXCLUSIVE MODE");
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

    /** Recounts the gate counters under a lock that holds picks off; emits how many were wrong. */
    public Mono<Long> reconcileGates() {
        return db.inTransaction(connection -> Flux.from(connection.createStatement(lockGates).execute())
                        .concatMap(result -> result.getRowsUpdated())
                        .thenMany(Flux.from(connection.createStatement(reconcileGates).execute()))
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .single();
    }
}
