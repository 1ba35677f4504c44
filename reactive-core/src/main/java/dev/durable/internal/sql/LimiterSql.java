package dev.durable.internal.sql;

import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The limiters' own statements. The PostgreSQL limiter admits inside the pick ({@link AdmissionSql}) and
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
     * Recounts every gate counter from the executing rows and the live permits, drops expired
     * permits and empty counters; emits how many were wrong. The trigger keeps counters exact, this heals manual edits and restores.
     * Index: the counters' primary key; executing rows through the gated executing index. Locks: the counters,
     * which {@link #lockGates} already holds, so the count cannot race a pick.
     */
    private final String reconcileGates;

    /**
     * Draws $3 tokens from the bucket of rate limit $1, partition $2 (burst $4, $5 tokens a second)
     * for an inline step, which runs on its claim with no pick to admit it: takes them and returns a
     * row when the bucket, refilled as the pick refills it ({@link AdmissionSql#REFILLED}), affords them;
     * else returns nothing and leaves the bucket as it was. A bucket not there yet is full.
     * Index: the buckets' primary key. Locks: the bucket row, to the end of the statement.
     */
    private final String draw;

    /**
     * Counts the live claims of each gate counter ($1 gates, $2 keys, $3 shards, in that order):
     * executing rows whose lease has not run out (a lapsed lease can no longer be renewed, so it
     * holds no slot). What a lease-native limiter rebuilds lost counters from. Index: the gated
     * executing rows' partial index ({@code durable_instances_gated_executing_idx}): every executing row
     * of a gate, as many as the fleet runs at once, filtered on the counters. Locks: none.
     */
    private final String liveGateClaims;

    /**
     * Makes sure the counter of gate $1, key $2, shard $3 exists (capacity $4, nothing held) before
     * {@link #acquireSlots} locks it. Index: the counters' primary key. Locks: none when it exists.
     */
    private final String ensureCounter;

    /**
     * Locks counter ($1, $2, $3) before any permit statement touches its permits: every permit path
     * (acquire, renew, release, the sweep) and the reconcile (a table lock) take the counter first and
     * the permit rows after it, so two of them cannot wait on each other. Its own statement, since
     * the order of a data-modifying CTE's row locks is not defined. Index: the counters' primary key.
     * Locks: the counter row, to the end of the transaction (a pick skips it meanwhile).
     */
    private final String lockCounter;

    /**
     * Takes $6 slots of counter ($1, $2, $3) of capacity $4 for permit holder $5 with a lease of $7
     * ms, when they all fit; else takes nothing. Runs after {@link #lockCounter}: the expired permits
     * of the counter are counted off it (a crashed caller's slots come free here), then the permit is
     * recorded and counted on when it fits. Returns (granted, changed). Index: the counters' primary
     * key, the permits' counter index. Locks: the permit rows, under the counter's lock.
     */
    private final String acquireSlots;

    /**
     * Extends permit $1's lease to $2 ms from now when it has not ended; a permit found ended is
     * deleted and counted off its counter at once (its slots must not wait for the next acquire or
     * the reconcile). Returns (renewed). Runs after {@link #lockCounter}. Index: the permits' and the
     * counters' primary keys. Locks: the permit row, under the counter's lock.
     */
    private final String renewSlots;

    /**
     * Deletes permit $1 and counts its slots off its counter; nothing when it is gone already. Runs
     * after {@link #lockCounter}. Index: the permits' and the counters' primary keys. Locks: the
     * permit row, under the counter's lock.
     */
    private final String releaseSlots;

    /**
     * Counts off expired permits, at most $1 counters a batch (a crashed caller's slots come free within
     * a sweep tick, not at the next acquire or reconcile). The counters are locked first ({@code FOR
     * UPDATE SKIP LOCKED}: one an acquire or a pick holds is left to the next batch); a permit row is
     * only deleted through the join with a counter the statement has locked, so the counter's lock
     * comes first here too. Emits the permits deleted. Index: a read of the permits (few: one per
     * permit held now; the counter index cannot serve expires_at alone), the counters' primary key.
     * Locks: those counters and permits.
     */
    private final String sweepPermits;

    /**
     * Takes $3 of window $1, partition $2 (slot length $4 ms, limit $5) when the live slots of its ring
     * (the last {@link dev.durable.Limits.Window#SLOTS} + 1) plus $3 stay within the limit; else takes
     * nothing. A row not there yet is empty. Index: the windows' primary key. Locks: the window row, to
     * the end of the statement; a concurrent take waits and re-checks the updated row, so the limit holds.
     */
    private final String takeWindow;

    /**
     * An inline step's bucket and window at once, all or nothing: $3 tokens of bucket $1 (partition
     * $2, burst $4, $5 a second) and $8 of window $6 (partition $7, slot length $9 ms, limit $10). The
     * window row is locked and read first; the bucket is drawn only when the window has room, and the
     * window counted only when the bucket afforded the tokens. Returns one row when both took. One
     * race spends tokens for nothing, as in the pick: a window row that does not exist yet is created
     * by a concurrent take first and then has no room. Index:
     * the buckets' and windows' primary keys. Locks: the window row, then the bucket row (the pick's
     * order is the reverse only for rows it skip-locks, so neither waits on the other in a cycle).
     */
    private final String drawStacked;

    private final Db db;

    public LimiterSql(Db db, Tables tables) {
        this.db = db;
        int ring = dev.durable.Limits.Window.SLOTS + 1;
        String slot = "floor(extract(epoch FROM now()) * 1000 / $4::bigint)::bigint";
        String position = "(" + slot + " % " + ring + ")::int + 1";
        this.takeWindow = tables.render("""
                INSERT INTO {windows} AS w (name, partition_key, slots, counts, slot_millis)
                SELECT $1::text, $2::text, array_fill({slot}, ARRAY[{ring}]),
                       ARRAY(SELECT CASE WHEN i = {position} THEN $3::int ELSE 0 END FROM generate_series(1, {ring}) i),
                       $4::bigint
                 WHERE $3::int <= $5::int
                ON CONFLICT (name, partition_key) DO UPDATE
                   SET counts[{position}] = CASE WHEN w.slots[{position}] = {slot} THEN w.counts[{position}] ELSE 0 END + $3,
                       slots[{position}] = {slot}, slot_millis = $4
                 WHERE (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                         WHERE u.s > {slot} - {ring}) + $3 <= $5
                RETURNING w.name""").replace("{position}", position).replace("{slot}", slot)
                .replace("{ring}", Integer.toString(ring));
        String wslot = "floor(extract(epoch FROM now()) * 1000 / $9::bigint)::bigint";
        String wposition = "(" + wslot + " % " + ring + ")::int + 1";
        this.drawStacked = tables.render("""
                WITH win AS (
                    SELECT w.slots, w.counts FROM {windows} w WHERE (w.name, w.partition_key) = ($6::text, $7::text)
                       FOR UPDATE
                ), room AS (
                    SELECT coalesce((SELECT sum(u.c) FROM win w, unnest(w.slots, w.counts) AS u(s, c)
                                      WHERE u.s > {slot} - {ring}), 0) + $8::int <= $10::int AS ok
                ), drawn AS (
                    INSERT INTO {buckets} AS b (name, partition_key, tokens, refilled_at, taken)
                    SELECT $1::text, $2::text, $4::float8 - $3::int, now(), $3::int
                     WHERE $3::int <= $4::float8 AND (SELECT ok FROM room)
                    ON CONFLICT (name, partition_key) DO UPDATE
                       SET tokens = {refilled} - $3, taken = $3, refilled_at = greatest(b.refilled_at, now())
                     WHERE {refilled} >= $3 AND (SELECT ok FROM room)
                    RETURNING b.name
                ), counted AS (
                    INSERT INTO {windows} AS w (name, partition_key, slots, counts, slot_millis)
                    SELECT $6::text, $7::text, array_fill({slot}, ARRAY[{ring}]),
                           ARRAY(SELECT CASE WHEN i = {position} THEN $8::int ELSE 0 END FROM generate_series(1, {ring}) i),
                           $9::bigint
                     WHERE EXISTS (SELECT 1 FROM drawn) AND $8::int <= $10::int
                    ON CONFLICT (name, partition_key) DO UPDATE
                       SET counts[{position}] = CASE WHEN w.slots[{position}] = {slot} THEN w.counts[{position}] ELSE 0 END + $8,
                           slots[{position}] = {slot}, slot_millis = $9
                     WHERE (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                             WHERE u.s > {slot} - {ring}) + $8 <= $10
                    RETURNING w.name
                )
                SELECT name FROM counted""").replace("{refilled}", AdmissionSql.REFILLED.formatted("$4::float8", "$5::float8"))
                .replace("{position}", wposition).replace("{slot}", wslot).replace("{ring}", Integer.toString(ring));
        this.ensureCounter = tables.render("""
                INSERT INTO {gate_slots} (gate, key, shard, capacity, held, admitted) VALUES ($1, $2, $3, $4, 0, 0)
                ON CONFLICT (gate, key, shard) DO NOTHING""");
        this.lockCounter = tables.render("""
                SELECT s.held FROM {gate_slots} s WHERE (s.gate, s.key, s.shard) = ($1, $2, $3) FOR UPDATE""");
        this.acquireSlots = tables.render("""
                WITH counter AS (
                    SELECT s.held FROM {gate_slots} s WHERE (s.gate, s.key, s.shard) = ($1, $2, $3)
                ), expired AS (
                    DELETE FROM {permits} p
                     WHERE (p.gate, p.key, p.shard) = ($1, $2, $3) AND p.expires_at <= now()
                    RETURNING p.slots
                ), freed AS (
                    SELECT coalesce(sum(e.slots), 0)::int AS slots FROM expired e
                ), granted AS (
                    INSERT INTO {permits} (holder, gate, key, shard, slots, expires_at)
                    SELECT $5, $1, $2, $3, $6, now() + $7 * interval '1 millisecond'
                      FROM counter c, freed f
                     WHERE greatest(0, c.held - f.slots) + $6 <= $4
                    RETURNING slots
                ), counted AS (
                    UPDATE {gate_slots} s
                       SET held = greatest(0, s.held - f.slots) + coalesce((SELECT sum(g.slots) FROM granted g), 0)::int,
                           capacity = $4
                      FROM freed f
                     WHERE (s.gate, s.key, s.shard) = ($1, $2, $3) AND (f.slots > 0 OR EXISTS (SELECT 1 FROM granted))
                    RETURNING s.held
                )
                SELECT (SELECT count(*) FROM granted) AS granted, (SELECT count(*) FROM counted) AS counted""");
        this.renewSlots = tables.render("""
                WITH renewed AS (
                    UPDATE {permits} SET expires_at = now() + $2 * interval '1 millisecond'
                     WHERE holder = $1 AND expires_at > now()
                    RETURNING holder
                ), ended AS (
                    DELETE FROM {permits} WHERE holder = $1 AND expires_at <= now()
                    RETURNING gate, key, shard, slots
                ), counted AS (
                    UPDATE {gate_slots} s SET held = greatest(0, s.held - e.slots)
                      FROM ended e
                     WHERE (s.gate, s.key, s.shard) = (e.gate, e.key, e.shard)
                    RETURNING s.held
                )
                SELECT (SELECT count(*) FROM renewed) AS renewed, (SELECT count(*) FROM counted) AS counted""");
        this.sweepPermits = tables.render("""
                WITH locked AS (
                    SELECT s.gate, s.key, s.shard FROM {gate_slots} s
                     WHERE (s.gate, s.key, s.shard) IN (
                            SELECT DISTINCT p.gate, p.key, p.shard FROM {permits} p WHERE p.expires_at <= now())
                     ORDER BY s.gate, s.key, s.shard
                     LIMIT $1
                       FOR UPDATE OF s SKIP LOCKED
                ), gone AS (
                    DELETE FROM {permits} p USING locked l
                     WHERE (p.gate, p.key, p.shard) = (l.gate, l.key, l.shard) AND p.expires_at <= now()
                    RETURNING p.gate, p.key, p.shard, p.slots
                ), freed AS (
                    SELECT g.gate, g.key, g.shard, sum(g.slots)::int AS slots, count(*) AS permits
                      FROM gone g GROUP BY g.gate, g.key, g.shard
                ), counted AS (
                    UPDATE {gate_slots} s SET held = greatest(0, s.held - f.slots)
                      FROM freed f
                     WHERE (s.gate, s.key, s.shard) = (f.gate, f.key, f.shard)
                    RETURNING s.held
                )
                SELECT coalesce((SELECT sum(f.permits) FROM freed f), 0)::bigint AS swept,
                       (SELECT count(*) FROM counted) AS counted""");
        this.releaseSlots = tables.render("""
                WITH gone AS (
                    DELETE FROM {permits} WHERE holder = $1 RETURNING gate, key, shard, slots
                )
                UPDATE {gate_slots} s SET held = greatest(0, s.held - g.slots)
                  FROM gone g
                 WHERE (s.gate, s.key, s.shard) = (g.gate, g.key, g.shard)""");
        this.draw = tables.render("""
                INSERT INTO {buckets} AS b (name, partition_key, tokens, refilled_at, taken)
                SELECT $1::text, $2::text, $4::float8 - $3::int, now(), $3::int WHERE $3::int <= $4::float8
                ON CONFLICT (name, partition_key) DO UPDATE
                   SET tokens = {refilled} - $3, taken = $3, refilled_at = greatest(b.refilled_at, now())
                 WHERE {refilled} >= $3
                RETURNING b.name""").replace("{refilled}", AdmissionSql.REFILLED.formatted("$4::float8", "$5::float8"));
        this.lockGates = tables.render("LOCK TABLE {gate_slots} IN EXCLUSIVE MODE");
        this.liveGateClaims = tables.render("""
                SELECT count(i.id)
                  FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS g(gate, key, shard, ord)
                  LEFT JOIN {instances} i
                    ON i.status = 'executing' AND i.gate_name IS NOT NULL AND i.gate_name = g.gate
                   AND i.concurrency_key = g.key
                   AND i.gate_shard = g.shard AND i.lease_expires_at > now()
                 GROUP BY g.ord
                 ORDER BY g.ord""");
        this.reconcileGates = tables.render("""
                WITH expired AS (
                    DELETE FROM {permits} p WHERE p.expires_at <= now() RETURNING p.holder
                ), counted AS (
                    SELECT s.gate, s.key, s.shard, count(i.id) + coalesce((
                               SELECT sum(p.slots) FROM {permits} p
                                WHERE (p.gate, p.key, p.shard) = (s.gate, s.key, s.shard) AND p.expires_at > now()), 0)
                               AS executing
                      FROM {gate_slots} s
                      LEFT JOIN {instances} i
                        ON i.status = 'executing' AND i.gate_name IS NOT NULL AND i.gate_name = s.gate
                       AND i.concurrency_key = s.key
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

    /** The live claims of each gate counter, in the order given; see {@link #liveGateClaims}. */
    public Mono<List<Long>> liveGateClaims(String[] gates, String[] keys, Integer[] shards) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(liveGateClaims)
                                .bind(0, gates).bind(1, keys).bind(2, shards).execute())
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .collectList();
    }

    /**
     * Takes {@code slots} slots of a gate counter for a permit, all or none; emits whether it did.
     * Two statements in one short transaction: the counter must exist before it is locked.
     */
    public Mono<Boolean> acquireSlots(String holder, String gate, String key, int shard, int capacity, int slots,
            long leaseMillis) {
        return db.inTransaction(connection -> Flux.from(connection.createStatement(ensureCounter)
                                .bind(0, gate).bind(1, key).bind(2, shard).bind(3, capacity).execute())
                        .concatMap(result -> result.getRowsUpdated())
                        .thenMany(lockCounter(connection, gate, key, shard))
                        .thenMany(Flux.from(connection.createStatement(acquireSlots)
                                .bind(0, gate).bind(1, key).bind(2, shard).bind(3, capacity).bind(4, holder)
                                .bind(5, slots).bind(6, leaseMillis).execute()))
                        .concatMap(result -> result.map(row -> row.get("granted", Long.class) == 1L)))
                .single();
    }

    /**
     * Extends a permit's lease; emits false when it had ended (it is then counted off at once) or was
     * released. Counter first, then the permit, in one short transaction.
     */
    public Mono<Boolean> renewSlots(String holder, String gate, String key, int shard, long leaseMillis) {
        return db.inTransaction(connection -> lockCounter(connection, gate, key, shard)
                        .thenMany(Flux.from(connection.createStatement(renewSlots)
                                .bind(0, holder).bind(1, leaseMillis).execute()))
                        .concatMap(result -> result.map(row -> row.get("renewed", Long.class) == 1L)))
                .single();
    }

    /** Gives a permit's slots back; nothing when it is gone already. Counter first, then the permit. */
    public Mono<Void> releaseSlots(String holder, String gate, String key, int shard) {
        return db.inTransaction(connection -> lockCounter(connection, gate, key, shard)
                        .thenMany(Flux.from(connection.createStatement(releaseSlots).bind(0, holder).execute()))
                        .concatMap(result -> result.getRowsUpdated()))
                .then();
    }

    /**
     * Draws an inline step's tokens of {@code bucket} ({@code rate}) and count of {@code window}
     * ({@code slot}) together (see {@link #drawStacked}); emits whether both took.
     */
    public Mono<Boolean> drawStacked(Limits.RateLimit bucket, RateSlot rate, Limits.Window window, WindowSlot slot) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(drawStacked)
                                .bind(0, bucket.name()).bind(1, rate.partitionKey()).bind(2, rate.weight())
                                .bind(3, bucket.burst()).bind(4, bucket.ratePerSecond()).bind(5, window.name())
                                .bind(6, slot.partitionKey()).bind(7, slot.weight()).bind(8, window.slotMillis())
                                .bind(9, window.limit()).execute())
                        .concatMap(result -> result.map(row -> true)))
                .hasElements();
    }

    /** Counts off the expired permits of at most {@code counters} counters; emits how many permits. */
    public Mono<Long> sweepPermits(int counters, Duration timeout) {
        // Bounded on the server too (a maintenance statement): the client's timeout alone leaves it running.
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(sweepPermits).bind(0, counters).execute()))
                        .concatMap(result -> result.map(row -> row.get("swept", Long.class))))
                .single();
    }

    private Flux<Long> lockCounter(io.r2dbc.spi.Connection connection, String gate, String key, int shard) {
        return Flux.from(connection.createStatement(lockCounter).bind(0, gate).bind(1, key).bind(2, shard).execute())
                .concatMap(result -> result.getRowsUpdated());
    }

    /** Takes {@code weight} of a sliding window's partition; emits whether it fitted. */
    public Mono<Boolean> takeWindow(String window, String partition, int weight, long slotMillis, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(takeWindow)
                                .bind(0, window).bind(1, partition).bind(2, weight).bind(3, slotMillis)
                                .bind(4, limit).execute())
                        .concatMap(result -> result.map(row -> true)))
                .hasElements();
    }
}
