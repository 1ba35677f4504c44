package dev.durable.internal.sql;

import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.Candidate;
import dev.durable.internal.sql.Rows.ClaimedRow;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The pick: how a scheduler claims the next rows of its queue with a lease.
 *
 * <p>Every pick starts from the same candidates: none while the queue is paused (a probe of the
 * paused queues' primary key, evaluated once per pick), else the queue's runnable, eligible rows in urgency
 * order (priority, eligible time, id), read from the pick index, locked {@code FOR UPDATE SKIP
 * LOCKED} so concurrent picks never wait on each other, skipping rows whose ungated concurrency key
 * is executing now (a probe of the executing-key unique index) or is being claimed by another pick
 * right now (a transaction-scoped advisory lock on the key's hash, tried, never waited on; a hash
 * collision only defers an unrelated key to the next pick). Of the locked candidates at most one
 * per ungated key is claimed, the most urgent. One narrow race remains: a pick whose snapshot
 * predates another's commit of the same key, and whose try comes after that commit; the unique
 * index refuses it and the caller retries after a short random pause. Claiming bumps the attempt,
 * so a run that dies counts against max attempts.
 *
 * <p>The candidates are read priority by priority, so rows scheduled ahead (retries with backoff,
 * {@code runIn}) cost nothing however many there are: in the pick index (queue, priority,
 * eligible_at, id) they sit ahead of the due rows of any less urgent priority, and a plain scan of
 * {@code eligible_at <= now()} walks their index entries (1M future rows: 6,000 pages, 60 ms). A
 * recursive CTE finds the queue's distinct runnable priorities in ascending order, one index-only
 * descent each ({@code min(priority) > previous}); for each, a lateral scan of the index range
 * (queue, priority, ..now()] reads only due rows and stops at the first future one. The outer LIMIT
 * pulls the laterals lazily, most urgent first, so a priority is probed only while the pick is
 * not full and no more than $2 rows are ever locked. Urgency order is unchanged: (priority,
 * eligible_at, id). The cost is one descent per distinct priority of runnable rows, which is small.
 *
 * <p>Rows of an ungated key whose row is executing are still walked one by one (each a heap fetch
 * and a probe): none of the hot table's indexes carries the key of a runnable row, so no scan can
 * step over one key's rows. benchmarks/README.md measures that shape and what would flatten it.
 */
public final class PickSql {

    /**
     * The candidates and the one-per-key guard. The first two placeholders name the parameters of
     * the versions and the types this engine knows: a row of another type, or of a newer version, is
     * left for an engine that knows it (a rolling deploy never fails work an old node cannot run);
     * so is a row older than the oldest version the engine can migrate from (no migration path: it
     * waits, visible as unserved work). The versions parameter holds each type's current version, then
     * (at the same position plus the number of types) its lowest; without the second half every version
     * down to 1 runs. Two plain int comparisons: a range type would be cast from text on every row
     * under a generic plan.
     * The third takes the limit filters. {@code priorities} and the lateral scan are the skip over
     * future rows the class describes (the statement starts WITH RECURSIVE for them); the key probe,
     * the advisory lock and the row lock are taken inside the lateral, so only rows the outer LIMIT
     * pulls are ever locked.
     */
    private static final String CANDIDATES = """
            priorities AS (
                SELECT (SELECT min(f.priority) FROM {instances} f WHERE f.queue = $1 AND f.status = 'runnable') AS priority
                UNION ALL
                SELECT (SELECT min(f.priority) FROM {instances} f
                         WHERE f.queue = $1 AND f.status = 'runnable' AND f.priority > s.priority)
                  FROM priorities s
                 WHERE s.priority IS NOT NULL
            ), candidates AS (
                SELECT c.* FROM priorities s CROSS JOIN LATERAL (
                SELECT c.id, c.type, c.priority, c.eligible_at, c.gate_name, c.concurrency_key, c.gate_shard,
                       c.rate_limit, COALESCE(c.rate_partition, '') AS rate_partition, c.rate_weight,
                       CASE WHEN c.gate_name IS NULL THEN c.concurrency_key END AS ungated_key
                  FROM {instances} c
                 WHERE c.queue = $1 AND c.status = 'runnable' AND c.eligible_at <= now()
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
                   AND c.type_version <= (%1$s::int[])[array_position(%2$s::text[], c.type)]
                   AND c.type_version >= COALESCE((%1$s::int[])[array_position(%2$s::text[], c.type) + cardinality(%2$s::text[])], 1)
                   AND (c.concurrency_key IS NULL OR c.gate_name IS NOT NULL OR CASE
                        WHEN EXISTS (SELECT 1 FROM {instances} e
                                      WHERE e.concurrency_key = c.concurrency_key AND e.status = 'executing'
                                        AND e.gate_name IS NULL) THEN false
                        ELSE pg_try_advisory_xact_lock(hashtextextended(c.concurrency_key, 0)) END)
                   AND c.priority = s.priority
                   %3$s
                 ORDER BY c.priority, c.eligible_at, c.id
                 LIMIT $2
                   FOR UPDATE OF c SKIP LOCKED) c
                 LIMIT $2
            ), one_per_key AS (
                SELECT * FROM (
                    SELECT candidates.*, row_number() OVER (
                               PARTITION BY ungated_key, CASE WHEN ungated_key IS NULL THEN id END
                               ORDER BY priority, eligible_at, id) AS key_rank
                      FROM candidates) ranked
                 WHERE key_rank = 1
            )""";

    /**
     * True when the gate counter of the row aliased {@code %1$s} is full: the filter that keeps such
     * rows out of a pick, and the count of rows it held back. Index: the counters' primary key. Locks: none.
     */
    private static final String GATE_FULL = """
            EXISTS (SELECT 1 FROM {gate_slots} s
                     WHERE s.gate = %1$s.gate_name AND s.key = %1$s.concurrency_key AND s.shard = %1$s.gate_shard
                       AND s.held >= s.capacity)""";

    /**
     * True when the bucket of the row aliased {@code %1$s} (refilled by the time since its last
     * admission, capped at its burst) cannot afford the row's weight; needs the {@code rates} CTE.
     * Index: the buckets' primary key. Locks: none.
     */
    private static final String BUCKET_SHORT = """
            EXISTS (SELECT 1 FROM {buckets} b JOIN rates r ON r.name = b.name
                     WHERE b.name = %1$s.rate_limit AND b.partition_key = COALESCE(%1$s.rate_partition, '')
                       AND {refilled}
                           < %1$s.rate_weight)""";

    /**
     * True when the sliding window of the row aliased {@code %1$s} (a window's name in its rate
     * slot) cannot take the row's weight on top of what its live slots counted; needs the
     * {@code wins} CTE. Index: the windows' primary key. Locks: none.
     */
    private static final String WINDOW_FULL = """
            EXISTS (SELECT 1 FROM {windows} w JOIN wins x ON x.name = w.name
                     WHERE w.name = %1$s.rate_limit AND w.partition_key = COALESCE(%1$s.rate_partition, '')
                       AND (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                             WHERE u.s > floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint - {ring})
                           + %1$s.rate_weight > x.lim)""";

    /**
     * The tokens bucket {@code b} holds now: what it held at its last admission, refilled at the
     * rate ({@code %2$s}) for the time since, capped at the burst ({@code %1$s}). A bucket's clock only
     * moves forward, so a transaction that started before another's admission cannot rewind it and
     * over-refill. The one spelling of the refill, here and in {@link LimiterSql}.
     */
    static final String REFILLED = "least(%1$s, b.tokens + %2$s * greatest(0, extract(epoch FROM now() - b.refilled_at)))";

    /** Claims the rows of the CTE named by {@code %s} for worker $3 with a lease of $4 ms. */
    private static final String CLAIM = """
            UPDATE {instances} i
               SET status = 'executing', claimed_by = $3, attempt = i.attempt + 1,
                   lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
              FROM %s m
             WHERE i.id = m.id
            RETURNING\s""";

    /**
     * The pick of an engine that knows no limits, in one statement. Rows with a gate or rate limit
     * are left to engines that know them. Index: the pick index for candidates (an index-only
     * descent per distinct runnable priority, then each priority's due range), the executing-key
     * index for the key probe, the primary key for the claim. Locks: the claimed rows (skip locked).
     */
    private final String pick;

    /**
     * The pick of an engine that knows gates or rate limits (the PostgreSQL limiter), in one
     * statement: as {@link #pick}, and the limits are admitted in it, all or nothing: a row is
     * claimed only when each of its limits admits it, and no limit spends anything on a row another
     * refuses. Of the candidates left after the per-key guard, the gate counters are locked and read
     * first, without taking anything: rows of a gate pass while their rank on their (gate, key,
     * shard) counter is within its room. Only those are offered to their buckets, in urgency order
     * while the bucket (refilled by the time since its last admission, capped at its burst) holds
     * their cumulative weight; the bucket row is upserted and the tokens taken recorded on it. The
     * rows both admitted are then counted up on their counters, which this statement holds locked,
     * so the room it read is still there (the one exception: a counter that did not exist yet and
     * that a concurrent pick creates first; its insert then admits what is left, and a row it cannot
     * seat has spent its tokens). Candidates whose bucket or counter is already known to be full are skipped
     * before the LIMIT, so throttled rows never crowd unrelated work out of a pick. Rows of limits
     * this engine does not know are left for an engine that does. $5-$7 are the gates (name,
     * capacity, shards), $8-$10 the rate limits (name, tokens a second, burst), $11-$12 the known
     * types and their versions, $13-$15 the sliding windows (name, slot length in ms, limit). A
     * row's rate slot names a bucket or a window: a window's rows are admitted as a bucket's are (in
     * urgency order while their cumulative weight fits on top of what the window's live slots
     * counted), recorded on its row (upserted, in key order, locked by the upsert) in its current
     * slot; a window known to be full skips its rows before the LIMIT as an empty bucket does. A bucket's clock
     * only moves forward, so a pick whose transaction started before another's admission cannot
     * rewind it and over-refill.
     *
     * <p>A gate counter another transaction holds locked (a concurrent pick or commit on the same
     * shard) is skipped, not waited on: its rows count as held by a full gate for this pick, and
     * the other shards admit as usual, so picks on a hot sharded gate do not serialize. Only a
     * counter that does not exist yet can make two picks wait on each other (both insert it).
     *
     * <p>It also counts the rows a limit held back, by reason: of the head of the queue (its first
     * $2 runnable, eligible rows in urgency order, read without locks), those a full gate or an
     * empty bucket keeps out, plus the candidates refused inside the pick. The statement always
     * returns one row more than it claims or not: {@code gate_held, gate_sample_id,
     * gate_sample_type, rate_held, rate_sample_id, rate_sample_type} on every row, the claimed
     * columns null on a row that claims nothing.
     *
     * <p>Index: as {@link #pick} (the head of the queue through the pick index too, priority by
     * priority over the same {@code priorities}), plus the primary
     * keys of the counters and buckets. Locks: the claimed rows (skip locked); the counter rows it
     * admits on, locked {@code FOR UPDATE SKIP LOCKED} in key order before their upsert; the bucket
     * rows it upserts, in key order, so two picks lock them in the same order and never deadlock on them.
     */
    private final String pickWithLimits;

    /**
     * The first half of the pick of an engine whose limiter is not in the database (Redis): locks
     * the candidates as {@link #pick} does, limited rows of known names included, and returns them
     * unclaimed with their limits; then {@link #claimLocked} claims the admitted and unlimited ones
     * in the same transaction. Rows of a (gate, key, shard) or (rate limit, partition) the limiter
     * refused a moment ago ($5, $6: name, chr(31), key [, chr(31), shard]) are skipped before the
     * LIMIT. $3, $4: the gates and rate limits this engine knows; $7, $8: the types and versions.
     * Index: as {@link #pick}. Locks: the candidates (skip locked), until the transaction ends.
     */
    private final String lockCandidates;

    /**
     * The second half: claims the locked rows $1 for worker $2 with a lease of $3 ms.
     * Index: primary key. Locks: the rows, which the transaction already holds.
     */
    private final String claimLocked;

    private final Db db;
    private final boolean limits;
    private final String[] gateNames;
    private final Integer[] gateCapacities;
    private final Integer[] gateShards;
    private final String[] rateNames;
    private final Double[] rates;
    private final Integer[] bursts;
    private final String[] windowNames;
    private final Long[] windowSlots;
    private final Integer[] windowLimits;
    /** The names a row's rate slot may hold: rate limits, then sliding windows. */
    private final String[] rateSlotNames;
    private final String[] types;
    /** Per known type its current version, then per known type (same order) the lowest it runs. */
    private final Integer[] versions;

    /** The statements of an engine that knows these limits, and these types at these versions (and every older one). */
    public PickSql(Db db, Tables tables, Collection<Limits.Gate> gates, Collection<Limits.RateLimit> rateLimits,
            Map<String, Integer> knownTypes) {
        this(db, tables, gates, rateLimits, List.of(), knownTypes, Map.of());
    }

    /**
     * The statements of an engine that knows these limits (a row's rate slot names a token bucket or a
     * sliding window, admitted the same way: in urgency order, all or nothing with the row's gate), and
     * these types at these versions, each down to its lowest version in {@code lowestVersions} (1 when
     * absent).
     */
    public PickSql(Db db, Tables tables, Collection<Limits.Gate> gates, Collection<Limits.RateLimit> rateLimits,
            Collection<Limits.Window> windows, Map<String, Integer> knownTypes, Map<String, Integer> lowestVersions) {
        this.db = db;
        this.limits = !gates.isEmpty() || !rateLimits.isEmpty() || !windows.isEmpty();
        this.windowNames = windows.stream().map(Limits.Window::name).toArray(String[]::new);
        this.windowSlots = windows.stream().map(Limits.Window::slotMillis).toArray(Long[]::new);
        this.windowLimits = windows.stream().map(Limits.Window::limit).toArray(Integer[]::new);
        this.rateSlotNames = java.util.stream.Stream.concat(rateLimits.stream().map(Limits.RateLimit::name),
                windows.stream().map(Limits.Window::name)).toArray(String[]::new);
        this.gateNames = gates.stream().map(Limits.Gate::name).toArray(String[]::new);
        this.gateCapacities = gates.stream().map(Limits.Gate::capacity).toArray(Integer[]::new);
        this.gateShards = gates.stream().map(Limits.Gate::shards).toArray(Integer[]::new);
        this.rateNames = rateLimits.stream().map(Limits.RateLimit::name).toArray(String[]::new);
        this.rates = rateLimits.stream().map(Limits.RateLimit::ratePerSecond).toArray(Double[]::new);
        this.bursts = rateLimits.stream().map(Limits.RateLimit::burst).toArray(Integer[]::new);
        this.types = knownTypes.keySet().toArray(String[]::new);
        this.versions = java.util.stream.Stream.concat(knownTypes.values().stream(),
                        knownTypes.keySet().stream().map(type -> lowestVersions.getOrDefault(type, 1)))
                .toArray(Integer[]::new);
        this.pick = tables.render("WITH RECURSIVE " + CANDIDATES.formatted("$6", "$5",
                        "AND c.gate_name IS NULL AND c.rate_limit IS NULL")
                + "\n" + CLAIM.formatted("one_per_key") + ClaimColumns.SELECT);
        this.pickWithLimits = tables.render("""
                WITH RECURSIVE gates AS (
                    SELECT * FROM unnest($5::text[], $6::int[], $7::int[]) AS g(name, capacity, shards)
                ), rates AS (
                    SELECT * FROM unnest($8::text[], $9::float8[], $10::int[]) AS r(name, rate, burst)
                ), wins AS (
                    SELECT * FROM unnest($13::text[], $14::bigint[], $15::int[]) AS x(name, slot_ms, lim)
                ),\s""" + CANDIDATES.formatted("$12", "$11",
                "AND (c.gate_name IS NULL OR (c.gate_name = ANY ($5) AND NOT " + GATE_FULL.formatted("c") + "))\n"
                + "AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($8) AND NOT " + BUCKET_SHORT.formatted("c") + ")\n"
                + "     OR (c.rate_limit = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c") + "))")
                + """
                , gate_wanted AS (
                    SELECT o.*, row_number() OVER (PARTITION BY o.gate_name, o.concurrency_key, o.gate_shard
                                                   ORDER BY o.priority, o.eligible_at, o.id) AS gate_rank
                      FROM one_per_key o
                ), gate_locked AS (
                    SELECT s.gate, s.key, s.shard, s.held FROM {gate_slots} s
                     WHERE (s.gate, s.key, s.shard) IN (SELECT gate_name, concurrency_key, gate_shard FROM gate_wanted)
                     ORDER BY s.gate, s.key, s.shard
                       FOR UPDATE OF s SKIP LOCKED
                ), gate_checked AS (
                    SELECT w.*, cap.capacity AS gate_capacity, CASE
                               WHEN w.gate_name IS NULL THEN true
                               WHEN l.gate IS NOT NULL THEN w.gate_rank <= cap.capacity - l.held
                               WHEN NOT EXISTS (SELECT 1 FROM {gate_slots} e
                                                 WHERE (e.gate, e.key, e.shard) = (w.gate_name, w.concurrency_key, w.gate_shard))
                                    THEN w.gate_rank <= cap.capacity
                               ELSE false END AS gate_ok
                      FROM gate_wanted w
                      LEFT JOIN gate_locked l ON (l.gate, l.key, l.shard) = (w.gate_name, w.concurrency_key, w.gate_shard)
                      LEFT JOIN gates g ON g.name = w.gate_name
                     CROSS JOIN LATERAL (SELECT g.capacity / g.shards
                                                + CASE WHEN w.gate_shard < g.capacity % g.shards THEN 1 ELSE 0 END
                                                AS capacity) cap
                ), rate_wanted AS (
                    SELECT c.*, sum(c.rate_weight) OVER (PARTITION BY c.rate_limit, c.rate_partition
                                                         ORDER BY c.priority, c.eligible_at, c.id) AS rate_cum
                      FROM gate_checked c
                     WHERE c.gate_ok
                ), rate_taken AS (
                    INSERT INTO {buckets} AS b (name, partition_key, tokens, refilled_at, taken)
                    SELECT w.rate_limit, w.rate_partition,
                           r.burst - coalesce(max(w.rate_cum) FILTER (WHERE w.rate_cum <= r.burst), 0), now(),
                           coalesce(max(w.rate_cum) FILTER (WHERE w.rate_cum <= r.burst), 0)
                      FROM rate_wanted w JOIN rates r ON r.name = w.rate_limit
                     GROUP BY w.rate_limit, w.rate_partition, r.burst
                     ORDER BY w.rate_limit, w.rate_partition
                    ON CONFLICT (name, partition_key) DO UPDATE
                       SET taken = coalesce((
                               SELECT max(w.rate_cum) FROM rate_wanted w, rates r
                                WHERE w.rate_limit = b.name AND w.rate_partition = b.partition_key AND r.name = b.name
                                  AND w.rate_cum <= {refilled}), 0),
                           tokens = (SELECT {refilled}
                                       FROM rates r WHERE r.name = b.name)
                                    - coalesce((
                               SELECT max(w.rate_cum) FROM rate_wanted w, rates r
                                WHERE w.rate_limit = b.name AND w.rate_partition = b.partition_key AND r.name = b.name
                                  AND w.rate_cum <= {refilled}), 0),
                           refilled_at = greatest(b.refilled_at, now())
                    RETURNING b.name, b.partition_key, b.taken
                ), window_taken AS (
                    INSERT INTO {windows} AS w (name, partition_key, slots, counts, slot_millis, taken)
                    SELECT g.name, g.partition_key, array_fill(g.slot, ARRAY[{ring}]),
                           ARRAY(SELECT CASE WHEN i = (g.slot % {ring})::int + 1 THEN g.fits ELSE 0 END
                                   FROM generate_series(1, {ring}) i),
                           g.slot_ms, g.fits
                      FROM (SELECT v.rate_limit AS name, v.rate_partition AS partition_key, x.slot_ms,
                                   floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint AS slot,
                                   coalesce(max(v.rate_cum) FILTER (WHERE v.rate_cum <= x.lim), 0)::int AS fits
                              FROM rate_wanted v JOIN wins x ON x.name = v.rate_limit
                             GROUP BY v.rate_limit, v.rate_partition, x.slot_ms, x.lim) g
                     ORDER BY g.name, g.partition_key
                    ON CONFLICT (name, partition_key) DO UPDATE
                       SET taken = {fits},
                           counts[{pos}] = CASE WHEN w.slots[{pos}] = EXCLUDED.slots[1] THEN w.counts[{pos}] ELSE 0 END
                                           + {fits},
                           slots[{pos}] = EXCLUDED.slots[1],
                           slot_millis = EXCLUDED.slot_millis
                    RETURNING w.name, w.partition_key, w.taken
                ), rate_admitted AS (
                    SELECT w.*, row_number() OVER (PARTITION BY w.gate_name, w.concurrency_key, w.gate_shard
                                                   ORDER BY w.priority, w.eligible_at, w.id) AS slot_rank
                      FROM rate_wanted w
                      LEFT JOIN rate_taken t ON t.name = w.rate_limit AND t.partition_key = w.rate_partition
                      LEFT JOIN window_taken wt ON wt.name = w.rate_limit AND wt.partition_key = w.rate_partition
                     WHERE w.rate_limit IS NULL OR w.rate_cum <= coalesce(t.taken, wt.taken)
                ), gate_taken AS (
                    INSERT INTO {gate_slots} AS s (gate, key, shard, capacity, held, admitted)
                    SELECT a.gate_name, a.concurrency_key, a.gate_shard, a.gate_capacity,
                           least(count(*), a.gate_capacity), least(count(*), a.gate_capacity)
                      FROM rate_admitted a
                     WHERE a.gate_name IS NOT NULL
                     GROUP BY a.gate_name, a.concurrency_key, a.gate_shard, a.gate_capacity
                     ORDER BY a.gate_name, a.concurrency_key, a.gate_shard
                    ON CONFLICT (gate, key, shard) DO UPDATE
                       SET capacity = EXCLUDED.capacity,
                           admitted = greatest(0, least(EXCLUDED.admitted, EXCLUDED.capacity - s.held)),
                           held = s.held + greatest(0, least(EXCLUDED.admitted, EXCLUDED.capacity - s.held))
                    RETURNING s.gate, s.key, s.shard, s.admitted
                ), admitted AS (
                    SELECT a.id FROM rate_admitted a
                      LEFT JOIN gate_taken t ON t.gate = a.gate_name AND t.key = a.concurrency_key AND t.shard = a.gate_shard
                     WHERE a.gate_name IS NULL OR a.slot_rank <= t.admitted
                ), peek AS (
                    SELECT p.id, p.type,
                """ + "p.gate_name IS NOT NULL AND " + GATE_FULL.formatted("p") + " AS gate_full,\n"
                + "p.rate_limit IS NOT NULL AND (" + BUCKET_SHORT.formatted("p") + " OR " + WINDOW_FULL.formatted("p")
                + ") AS rate_short\n" + """
                      FROM priorities s CROSS JOIN LATERAL (
                           SELECT * FROM {instances} p
                            WHERE p.queue = $1 AND p.priority = s.priority AND p.status = 'runnable'
                              AND p.eligible_at <= now()
                            ORDER BY p.eligible_at, p.id
                            LIMIT $2) p
                     LIMIT $2
                ), held AS (
                    SELECT 'gate' AS reason, id, type FROM peek WHERE gate_full
                    UNION ALL
                    SELECT 'rate', id, type FROM peek WHERE rate_short AND NOT gate_full
                    UNION ALL
                    SELECT 'rate', w.id, w.type FROM rate_wanted w
                      LEFT JOIN rate_taken t ON t.name = w.rate_limit AND t.partition_key = w.rate_partition
                      LEFT JOIN window_taken wt ON wt.name = w.rate_limit AND wt.partition_key = w.rate_partition
                     WHERE w.rate_limit IS NOT NULL AND w.rate_cum > coalesce(t.taken, wt.taken, 0)
                    UNION ALL
                    SELECT 'gate', c.id, c.type FROM gate_checked c WHERE NOT c.gate_ok
                    UNION ALL
                    SELECT 'gate', a.id, a.type FROM rate_admitted a
                      LEFT JOIN gate_taken t ON t.gate = a.gate_name AND t.key = a.concurrency_key AND t.shard = a.gate_shard
                     WHERE a.gate_name IS NOT NULL AND a.slot_rank > coalesce(t.admitted, 0)
                ), throttled AS (
                    SELECT count(*) FILTER (WHERE reason = 'gate') AS gate_held,
                           min(id) FILTER (WHERE reason = 'gate') AS gate_sample_id,
                           (array_agg(type ORDER BY id) FILTER (WHERE reason = 'gate'))[1] AS gate_sample_type,
                           count(*) FILTER (WHERE reason = 'rate') AS rate_held,
                           min(id) FILTER (WHERE reason = 'rate') AS rate_sample_id,
                           (array_agg(type ORDER BY id) FILTER (WHERE reason = 'rate'))[1] AS rate_sample_type
                      FROM held
                ), claimed AS (
                """ + CLAIM.formatted("admitted") + ClaimColumns.SELECT + """
                )
                SELECT claimed.*, throttled.* FROM throttled LEFT JOIN claimed ON true""")
                .replace("{refilled}", REFILLED.formatted("r.burst", "r.rate"))
                .replace("{fits}", """
                        coalesce((SELECT max(v.rate_cum) FROM rate_wanted v, wins x
                                   WHERE v.rate_limit = w.name AND v.rate_partition = w.partition_key AND x.name = w.name
                                     AND v.rate_cum <= x.lim - (SELECT coalesce(sum(u.c), 0)
                                                                  FROM unnest(w.slots, w.counts) AS u(s, c)
                                                                 WHERE u.s > EXCLUDED.slots[1] - {ring})), 0)::int""")
                .replace("{pos}", "(EXCLUDED.slots[1] % {ring})::int + 1")
                .replace("{ring}", Integer.toString(Limits.Window.SLOTS + 1));
        this.lockCandidates = tables.render("WITH RECURSIVE " + CANDIDATES.formatted("$8", "$7", """
                       AND (c.gate_name IS NULL OR (c.gate_name = ANY ($3) AND NOT (
                            (c.gate_name || chr(31) || c.concurrency_key || chr(31) || c.gate_shard) = ANY ($5))))
                       AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($4) AND NOT (
                            (c.rate_limit || chr(31) || COALESCE(c.rate_partition, '')) = ANY ($6))))""") + """

                SELECT id, type, priority, (extract(epoch FROM eligible_at) * 1000000)::bigint AS eligible_micros, gate_name,
                       concurrency_key, gate_shard, rate_limit, rate_partition, rate_weight
                  FROM one_per_key""");
        this.claimLocked = tables.render("""
                UPDATE {instances} i
                   SET status = 'executing', claimed_by = $2, attempt = i.attempt + 1,
                       lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
                 WHERE i.id = ANY($1) AND i.status = 'runnable'
                RETURNING\s""" + ClaimColumns.SELECT);
    }

    /** The text of the pick of an engine without limits ($1-$4 as in a pick, $5-$6 the known types), for EXPLAIN. */
    public String pickText() {
        return pick;
    }

    /**
     * The text of the pick of an engine with limits ($1-$4 as in a pick, $5-$12 the limits and known
     * types as the class describes), for EXPLAIN.
     */
    public String pickWithLimitsText() {
        return pickWithLimits;
    }

    /** How many rows a limit held back in one pick, and one of them (its lowest id) with its type. */
    public record Throttled(long rows, long sampleId, @Nullable String sampleType) {

        static final Throttled NONE = new Throttled(0, 0, null);
    }

    /** What one pick claimed, and what full gates and empty buckets held back. */
    public record Picked(List<ClaimedRow> rows, Throttled byGate, Throttled byRate) {
    }

    /**
     * Claims up to {@code limit} rows of {@code queue} for {@code worker} in one statement, admitting
     * limited rows in it when the engine knows limits ({@link #pickWithLimits}).
     */
    public Mono<Picked> pick(String queue, int limit, String worker, long leaseMillis) {
        return db.withConnection(connection -> pickCounting(connection, queue, limit, worker, leaseMillis).flux())
                .single();
    }

    /** As {@link #pick(String, int, String, long)}, on the caller's connection (benchmarks roll it back). */
    public Flux<ClaimedRow> pick(Connection connection, String queue, int limit, String worker, long leaseMillis) {
        return pickCounting(connection, queue, limit, worker, leaseMillis).flatMapIterable(Picked::rows);
    }

    private Mono<Picked> pickCounting(Connection connection, String queue, int limit, String worker,
            long leaseMillis) {
        Statement statement = connection.createStatement(limits ? pickWithLimits : pick)
                .bind(0, queue).bind(1, limit).bind(2, worker).bind(3, leaseMillis);
        if (!limits) {
            statement.bind(4, types).bind(5, versions);
            return Flux.from(statement.execute()).concatMap(result -> result.map(ClaimColumns::read)).collectList()
                    .map(rows -> new Picked(rows, Throttled.NONE, Throttled.NONE));
        }
        statement.bind(4, gateNames).bind(5, gateCapacities).bind(6, gateShards)
                .bind(7, rateNames).bind(8, rates).bind(9, bursts).bind(10, types).bind(11, versions)
                .bind(12, windowNames).bind(13, windowSlots).bind(14, windowLimits);
        Throttled[] held = {Throttled.NONE, Throttled.NONE};
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(row -> {
                    held[0] = throttled(row, "gate");
                    held[1] = throttled(row, "rate");
                    return row.get("id", Long.class) == null ? Optional.<ClaimedRow>empty()
                            : Optional.of(ClaimColumns.read(row));
                }))
                .filter(Optional::isPresent).map(Optional::get)
                .collectList()
                .map(rows -> new Picked(rows, held[0], held[1]));
    }

    private static Throttled throttled(Readable row, String reason) {
        Long rows = row.get(reason + "_held", Long.class);
        if (rows == null || rows == 0) {
            return Throttled.NONE;
        }
        return new Throttled(rows, row.get(reason + "_sample_id", Long.class),
                row.get(reason + "_sample_type", String.class));
    }

    /** Locks up to {@code limit} candidates, in the caller's transaction; see {@link #lockCandidates}. */
    public Flux<Candidate> lockCandidates(Connection connection, String queue, int limit, String[] refusedGates,
            String[] refusedRates) {
        return Flux.from(connection.createStatement(lockCandidates)
                        .bind(0, queue).bind(1, limit).bind(2, gateNames).bind(3, rateSlotNames)
                        .bind(4, refusedGates).bind(5, refusedRates).bind(6, types).bind(7, versions).execute())
                .concatMap(result -> result.map(PickSql::toCandidate));
    }

    /** Claims locked rows, in the caller's transaction; see {@link #claimLocked}. */
    public Flux<ClaimedRow> claimLocked(Connection connection, List<Long> ids, String worker, long leaseMillis) {
        return Flux.from(connection.createStatement(claimLocked)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).bind(2, leaseMillis).execute())
                .concatMap(result -> result.map(ClaimColumns::read));
    }

    private static Candidate toCandidate(Readable row) {
        return new Candidate(row.get("id", Long.class), row.get("type", String.class), row.get("priority", Integer.class),
                row.get("eligible_micros", Long.class), row.get("gate_name", String.class),
                row.get("concurrency_key", String.class), ClaimColumns.orZero(row.get("gate_shard", Integer.class)),
                row.get("rate_limit", String.class), row.get("rate_partition", String.class),
                ClaimColumns.orZero(row.get("rate_weight", Integer.class)));
    }
}
