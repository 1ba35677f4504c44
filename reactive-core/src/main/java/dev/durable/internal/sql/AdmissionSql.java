package dev.durable.internal.sql;

import static dev.durable.internal.sql.CandidateSql.CLAIM;
import static dev.durable.internal.sql.CandidateSql.fill;

import dev.durable.Limits;

/**
 * Admission in the database (the PostgreSQL limiter, {@code InDatabaseAdmission}), as the fragments
 * the limited picks are made of ({@link PickSql#pickWithLimits}, {@link FairPickSql#fairPickWithLimits}):
 * the limits as tables ({@link #LIMIT_TABLES}), the candidate filter that keeps rows of full limits
 * out of the pick's LIMIT ({@link #LIMITED_FILTER}), and the admission after the candidate source
 * ({@link #LIMITED_ADMISSION}), which {@link #limited} puts around a source. The tokens an inline
 * step draws, the permits and the reconcile are the limiter's own statements ({@link LimiterSql}).
 *
 * <p>The pick of an engine that knows gates or rate limits is one statement, as the plain pick,
 * and the limits are admitted in it, all or nothing: a row is
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
 * types and their versions, $13-$15 the sliding windows (name, slot length in ms, limit); a fair
 * queue's weights follow ({@link FairPickSql}).
 *
 * <p>A row stacks up to three limits: its gate, its bucket (rate slot) and its window (window slot;
 * a window named in the rate slot, by rateLimit(name), counts as its window,
 * {@code stacked}). They are checked in that order, each on the rows the previous ones let
 * through, and nothing is spent until all have answered: the gate counters are locked (skip
 * locked) and read; then the windows of the seated rows are locked (skip locked) and read, rows
 * passing in urgency order while their cumulative weight fits on top of what the window's live
 * slots counted; then only those are offered to their buckets (upserted, tokens taken); then the
 * rows their bucket admitted are counted on their windows (which this statement holds locked, so
 * the room it read is still there, with the gate's one exception: a window row a concurrent pick
 * created first) and on their gate counters. A window or counter locked by another transaction
 * counts as full for this pick. A window known to be full skips its rows before the LIMIT as an
 * empty bucket does. A bucket's clock only moves forward, so a pick whose transaction started
 * before another's admission cannot rewind it and over-refill.
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
 * <p>Index: as the plain pick's (the head of the queue through the pick index too, priority by
 * priority over the same {@code priorities}), plus the primary
 * keys of the counters, windows and buckets. Locks: the claimed rows (skip locked); the counter
 * and window rows it admits on, locked {@code FOR UPDATE SKIP LOCKED} in key order before their
 * upsert; the bucket rows it upserts, in key order, so two picks lock them in the same order and
 * never deadlock on them (the rows it waits for are buckets only).
 */
final class AdmissionSql {

    private AdmissionSql() {
    }

    /**
     * True when the gate counter of the row aliased {@code %1$s} is full: the filter that keeps such
     * rows out of a pick, and the count of rows it held back. Index: the counters' primary key. Locks: none.
     */
    static final String GATE_FULL = """
            EXISTS (SELECT 1 FROM {gate_slots} s
                     WHERE s.gate = %1$s.gate_name AND s.key = %1$s.concurrency_key AND s.shard = %1$s.gate_shard
                       AND s.held >= s.capacity)""";

    /**
     * True when the bucket of the row aliased {@code %1$s} (refilled by the time since its last
     * admission, capped at its burst) cannot afford the row's weight; needs the {@code rates} CTE.
     * Index: the buckets' primary key. Locks: none.
     */
    static final String BUCKET_SHORT = """
            EXISTS (SELECT 1 FROM {buckets} b JOIN rates r ON r.name = b.name
                     WHERE b.name = %1$s.rate_limit AND b.partition_key = COALESCE(%1$s.rate_partition, '')
                       AND {refilled}
                           < %1$s.rate_weight)""";

    /**
     * True when the sliding window of the row aliased {@code %1$s} (named in its window slot,
     * {@code %2$s} = "window", or in its rate slot, "rate", when that names a window) cannot take the row's
     * weight on top of what its live slots counted; needs the {@code wins} CTE. Index: the windows'
     * primary key. Locks: none.
     */
    static final String WINDOW_FULL = """
            EXISTS (SELECT 1 FROM {windows} w JOIN wins x ON x.name = w.name
                     WHERE w.name = %1$s.%2$s_name AND w.partition_key = COALESCE(%1$s.%2$s_partition, '')
                       AND (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                             WHERE u.s > floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint - {ring})
                           + %1$s.%2$s_weight > x.lim)""";

    /** What the live slots of window row {@code w} (its {@code wins} row {@code x}) counted. */
    static final String WINDOW_USED = """
            (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
              WHERE u.s > floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint - {ring})""";

    /**
     * The tokens bucket {@code b} holds now: what it held at its last admission, refilled at the
     * rate ({@code %2$s}) for the time since, capped at the burst ({@code %1$s}). A bucket's clock only
     * moves forward, so a transaction that started before another's admission cannot rewind it and
     * over-refill. The one spelling of the refill, here and in {@link LimiterSql}.
     */
    static final String REFILLED = "least(%1$s, b.tokens + %2$s * greatest(0, extract(epoch FROM now() - b.refilled_at)))";

    /**
     * The limits a limited pick admits, as tables: the gates ($5-$7: name, capacity, shards), the
     * rate limits ($8-$10: name, tokens a second, burst) and the sliding windows ($13-$15: name, slot
     * length in ms, limit). They come first in its WITH RECURSIVE, before the candidate source.
     */
    static final String LIMIT_TABLES = """
            gates AS (
                SELECT * FROM unnest($5::text[], $6::int[], $7::int[]) AS g(name, capacity, shards)
            ), rates AS (
                SELECT * FROM unnest($8::text[], $9::float8[], $10::int[]) AS r(name, rate, burst)
            ), wins AS (
                SELECT * FROM unnest($13::text[], $14::bigint[], $15::int[]) AS x(name, slot_ms, lim)
            )""";

    /**
     * The limit filter of the limited pick: a limited row of a limit this engine knows, whose gate
     * counter, bucket or window is not already known to be full (so throttled rows never crowd
     * unrelated work out of the pick's LIMIT).
     */
    static final String LIMITED_FILTER =
            "AND (c.gate_name IS NULL OR (c.gate_name = ANY ($5) AND NOT " + GATE_FULL.formatted("c") + "))\n"
            + "AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($8) AND NOT " + BUCKET_SHORT.formatted("c") + ")\n"
            + "     OR (c.rate_limit = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c", "rate").replace("c.rate_name", "c.rate_limit") + "))\n"
            + "AND (c.window_name IS NULL OR (c.window_name = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c", "window") + "))";

    /**
     * What the limited pick does after its candidate source: admits the rows of {@code one_per_key}
     * all or nothing across their limits, claims those admitted ({@code admitted}), and counts what
     * the limits held back (the class tells how). {@code {key_cap}}: the capacity of a
     * row's gate counter when it is not the gate's share per shard ({@link FairPickSql#FAIR_KEY_CAP}, or null);
     * {@code {report}}: more columns for its rows ({@link FairPickSql#FAIR_REPORT}, or none).
     * Its {@code {refilled}}, {@code {fits}}, {@code {pos}}, {@code {window_used}} and {@code {ring}}
     * are filled by {@link #limited}.
     */
    static final String LIMITED_ADMISSION = """
            , stacked AS (
                -- A window named in the rate slot is admitted as the row's window.
                SELECT o.id, o.type, o.priority, o.eligible_at, o.gate_name, o.concurrency_key, o.gate_shard,
                       CASE WHEN o.rate_limit = ANY ($13) THEN NULL ELSE o.rate_limit END AS rate_limit,
                       o.rate_partition, o.rate_weight,
                       CASE WHEN o.rate_limit = ANY ($13) THEN o.rate_limit ELSE o.window_name END AS window_name,
                       CASE WHEN o.rate_limit = ANY ($13) THEN o.rate_partition ELSE o.window_partition END
                           AS window_partition,
                       CASE WHEN o.rate_limit = ANY ($13) THEN o.rate_weight ELSE o.window_weight END AS window_weight
                  FROM one_per_key o
            ), gate_wanted AS (
                SELECT o.*, row_number() OVER (PARTITION BY o.gate_name, o.concurrency_key, o.gate_shard
                                               ORDER BY o.priority, o.eligible_at, o.id) AS gate_rank
                  FROM stacked o
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
                 CROSS JOIN LATERAL (SELECT COALESCE({key_cap}, g.capacity / g.shards
                                            + CASE WHEN w.gate_shard < g.capacity % g.shards THEN 1 ELSE 0 END)
                                            AS capacity) cap
            ), window_wanted AS (
                SELECT c.*, sum(c.window_weight) OVER (PARTITION BY c.window_name, c.window_partition
                                                       ORDER BY c.priority, c.eligible_at, c.id) AS window_cum
                  FROM gate_checked c
                 WHERE c.gate_ok
            ), window_locked AS (
                SELECT w.name, w.partition_key, w.slots, w.counts FROM {windows} w
                 WHERE (w.name, w.partition_key) IN (SELECT window_name, window_partition FROM window_wanted)
                 ORDER BY w.name, w.partition_key
                   FOR UPDATE OF w SKIP LOCKED
            ), window_checked AS (
                SELECT v.*, CASE
                           WHEN v.window_name IS NULL THEN true
                           WHEN w.name IS NOT NULL THEN v.window_cum <= x.lim - {window_used}
                           WHEN NOT EXISTS (SELECT 1 FROM {windows} e
                                             WHERE (e.name, e.partition_key) = (v.window_name, v.window_partition))
                                THEN v.window_cum <= x.lim
                           ELSE false END AS window_ok
                  FROM window_wanted v
                  LEFT JOIN window_locked w ON (w.name, w.partition_key) = (v.window_name, v.window_partition)
                  LEFT JOIN wins x ON x.name = v.window_name
            ), rate_wanted AS (
                SELECT c.*, sum(c.rate_weight) OVER (PARTITION BY c.rate_limit, c.rate_partition
                                                     ORDER BY c.priority, c.eligible_at, c.id) AS rate_cum
                  FROM window_checked c
                 WHERE c.window_ok
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
            ), rate_passed AS (
                SELECT w.*, sum(w.window_weight) OVER (PARTITION BY w.window_name, w.window_partition
                                                       ORDER BY w.priority, w.eligible_at, w.id) AS window_fit
                  FROM rate_wanted w
                  LEFT JOIN rate_taken t ON t.name = w.rate_limit AND t.partition_key = w.rate_partition
                 WHERE w.rate_limit IS NULL OR w.rate_cum <= t.taken
            ), window_taken AS (
                INSERT INTO {windows} AS w (name, partition_key, slots, counts, slot_millis, taken)
                SELECT g.name, g.partition_key, array_fill(g.slot, ARRAY[{ring}]),
                       ARRAY(SELECT CASE WHEN i = (g.slot % {ring})::int + 1 THEN g.fits ELSE 0 END
                               FROM generate_series(1, {ring}) i),
                       g.slot_ms, g.fits
                  FROM (SELECT v.window_name AS name, v.window_partition AS partition_key, x.slot_ms,
                               floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint AS slot,
                               coalesce(max(v.window_fit) FILTER (WHERE v.window_fit <= x.lim), 0)::int AS fits
                          FROM rate_passed v JOIN wins x ON x.name = v.window_name
                         GROUP BY v.window_name, v.window_partition, x.slot_ms, x.lim) g
                 ORDER BY g.name, g.partition_key
                ON CONFLICT (name, partition_key) DO UPDATE
                   SET taken = {fits},
                       counts[{pos}] = CASE WHEN w.slots[{pos}] = EXCLUDED.slots[1] THEN w.counts[{pos}] ELSE 0 END
                                       + {fits},
                       slots[{pos}] = EXCLUDED.slots[1],
                       slot_millis = EXCLUDED.slot_millis
                RETURNING w.name, w.partition_key, w.taken
            ), rate_admitted AS (
                SELECT p.*, row_number() OVER (PARTITION BY p.gate_name, p.concurrency_key, p.gate_shard
                                               ORDER BY p.priority, p.eligible_at, p.id) AS slot_rank
                  FROM rate_passed p
                  LEFT JOIN window_taken wt ON wt.name = p.window_name AND wt.partition_key = p.window_partition
                 WHERE p.window_name IS NULL OR p.window_fit <= wt.taken
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
            + "(p.rate_limit IS NOT NULL AND (" + BUCKET_SHORT.formatted("p") + " OR "
            + WINDOW_FULL.formatted("p", "rate").replace("p.rate_name", "p.rate_limit") + ")\n"
            + " OR p.window_name IS NOT NULL AND " + WINDOW_FULL.formatted("p", "window") + ") AS rate_short\n" + """
                  FROM priorities s CROSS JOIN LATERAL (
                       SELECT * FROM {instances} p
                        WHERE p.queue = $1 AND p.priority = s.priority AND p.status = 'runnable' AND NOT p.key_waiting
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
                 WHERE w.rate_limit IS NOT NULL AND w.rate_cum > coalesce(t.taken, 0)
                UNION ALL
                SELECT 'rate', v.id, v.type FROM window_checked v WHERE NOT v.window_ok
                UNION ALL
                SELECT 'rate', p.id, p.type FROM rate_passed p
                  LEFT JOIN window_taken wt ON wt.name = p.window_name AND wt.partition_key = p.window_partition
                 WHERE p.window_name IS NOT NULL AND p.window_fit > coalesce(wt.taken, 0)
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
            """ + fill(CLAIM, "claimed", "admitted") + ClaimColumns.SELECT + """
            )
            SELECT claimed.*, throttled.*{report} FROM throttled LEFT JOIN claimed ON true""";

    /**
     * The limited pick around a candidate source ({@link CandidateSql#plainSource} or {@link FairPickSql#fairSource} with
     * {@link #LIMITED_FILTER}, parameters $11-$12): {@link #LIMIT_TABLES}, the source,
     * {@link #LIMITED_ADMISSION} with {@code keyCap} and {@code report}, its refill and window expressions filled in.
     */
    static String limited(Tables tables, String source, String keyCap, String report) {
        return tables.render("WITH RECURSIVE " + LIMIT_TABLES + ", " + source
                        + fill(LIMITED_ADMISSION, "key_cap", keyCap.strip(), "report", report))
                .replace("{refilled}", REFILLED.formatted("r.burst", "r.rate"))
                .replace("{fits}", """
                        coalesce((SELECT max(v.window_fit) FROM rate_passed v, wins x
                                   WHERE v.window_name = w.name AND v.window_partition = w.partition_key AND x.name = w.name
                                     AND v.window_fit <= x.lim - (SELECT coalesce(sum(u.c), 0)
                                                                  FROM unnest(w.slots, w.counts) AS u(s, c)
                                                                 WHERE u.s > EXCLUDED.slots[1] - {ring})), 0)::int""")
                .replace("{pos}", "(EXCLUDED.slots[1] % {ring})::int + 1")
                .replace("{window_used}", WINDOW_USED.strip())
                .replace("{ring}", Integer.toString(Limits.Window.SLOTS + 1));
    }
}
