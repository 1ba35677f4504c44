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
 * <p>Of an ungated key's runnable rows only its head is a candidate (migration 13): the others carry
 * {@code key_waiting}, which the pick indexes leave out, so every scan here reads {@code NOT
 * key_waiting} beside {@code status = 'runnable'} (or the partial index cannot serve it) and a busy
 * key's backlog costs the pick nothing (benchmarks/README.md, "Pick cost by backlog shape"). The
 * executing-key probe and the try-lock stay as the guard that needs no invariant: a key's head is
 * runnable only while none of its rows executes, so the probe reads one index entry per keyed head.
 *
 * <p>A fair queue ({@code QueueOptions.fairness}) has its own candidates ({@link #FAIR_CANDIDATES}:
 * claims shared across the rows' fairness keys by weight) and moves ({@link #FAIR_MOVES}: the keys'
 * passes advanced, keys without work parked), in the same one statement, with or without limits;
 * the other queues' statements are unchanged. The queue's scheduler also runs {@link #age} (priority
 * aging) and stores the weigher's weights ({@link #storeWeights}), each at most every few seconds.
 */
public final class PickSql {

    /** What every candidate scan reads of a row (alias {@code c}): one list, so the picks agree on their columns. */
    private static final String CANDIDATE_COLUMNS = """
                SELECT c.id, c.type, c.priority, c.eligible_at, c.gate_name, c.concurrency_key, c.gate_shard,
                       c.rate_limit, COALESCE(c.rate_partition, '') AS rate_partition, c.rate_weight,
                       c.window_name, COALESCE(c.window_partition, '') AS window_partition, c.window_weight,
                       CASE WHEN c.gate_name IS NULL THEN c.concurrency_key END AS ungated_key
            """;

    /**
     * The per-row conditions every candidate scan shares (plain, limited, fair): the row's version is
     * one this engine runs (%1$s the versions, %2$s the types: current versions, then lowest ones), and
     * an ungated concurrency key is neither executing now nor being claimed by another pick (the
     * executing-key probe, then a tried advisory lock on the key's hash). One place, so a guard added
     * here reaches every pick.
     */
    private static final String RUNS_HERE = """
                   AND c.type_version <= (%1$s::int[])[array_position(%2$s::text[], c.type)]
                   AND c.type_version >= COALESCE((%1$s::int[])[array_position(%2$s::text[], c.type) + cardinality(%2$s::text[])], 1)
                   AND (c.concurrency_key IS NULL OR c.gate_name IS NOT NULL OR CASE
                        WHEN EXISTS (SELECT 1 FROM {instances} e
                                      WHERE e.concurrency_key = c.concurrency_key AND e.status = 'executing'
                                        AND e.gate_name IS NULL) THEN false
                        ELSE pg_try_advisory_xact_lock(hashtextextended(c.concurrency_key, 0)) END)
            """;

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
                SELECT (SELECT min(f.priority) FROM {instances} f WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting) AS priority
                UNION ALL
                SELECT (SELECT min(f.priority) FROM {instances} f
                         WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > s.priority)
                  FROM priorities s
                 WHERE s.priority IS NOT NULL
            ), candidates AS (
                SELECT c.* FROM priorities s CROSS JOIN LATERAL (
            """ + CANDIDATE_COLUMNS + """
                  FROM {instances} c
                 WHERE c.queue = $1 AND c.status = 'runnable' AND NOT c.key_waiting AND c.eligible_at <= now()
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
            """ + RUNS_HERE + """
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
     * The candidates of a fair queue ({@code Fairness}), with the same columns (and the row's key)
     * and the same guards as {@link #CANDIDATES}, shared across keys by stride scheduling.
     * <ul>
     * <li>The walk reads the queue's active keys in pass order (their pass index), at most $2, plus
     *     parked keys whose scheduled rows came due (their wake index), which join at the queue's
     *     virtual time (the least pass walked); keys without work are parked and cost nothing. A key
     *     at its cap (the queue's cap gate, {@code Fairness.capGate}, full for it) is stepped over.
     * <li>Each walked key is offered slots j = 1..$2 finishing at pass + j / weight; the $2 earliest
     *     finishes are the pick's quotas. Weights: the pick's arrays of keys and weights (the fourth
     *     and fifth format arguments name their parameters), else the weight stored with the key,
     *     else the default (the sixth).
     * <li>One lateral per key with a quota reads that key's due rows in urgency order from the fair
     *     pick index ((queue, fairness_key), priority, eligible_at, id) and locks at most its quota,
     *     so one key's backlog is never walked for another. The index leads with queue and key as
     *     one value and the lateral names the key that way, so only this index can serve it (the
     *     pick index would walk every other key's rows); the key's IS NOT NULL is spelled out, as a
     *     partial index's predicate is proven from plain conditions only. The guards and the limit
     *     filter run on at most four times the quota of the key's first due rows (an inner LIMIT
     *     on the index read; the rows are then read and locked by their ctid, one page each, in the
     *     same order, so the walk still stops at the quota; a row updated since the read is left
     *     for the next pick), so a throttled key (its bucket, window or gate full) or one whose rows
     *     are all key-blocked costs a bounded read per pick, never a walk of its whole backlog;
     *     such a key is looked at again as a key with due rows (it steps back a slot).
     * <li>When keys hold fewer due rows than their quotas, the pick stays full (work-conserving):
     *     the keys that filled theirs offer further rows, after their last, and the earliest
     *     finishes take the slots left.
     * </ul>
     * A key's future rows of a more urgent priority are walked in its lateral (no per-key priority
     * skip). {@code priorities} is kept for the statements that read the head of the queue through it.
     */
    private static final String FAIR_CANDIDATES = """
            priorities AS (
                SELECT (SELECT min(f.priority) FROM {instances} f WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting) AS priority
                UNION ALL
                SELECT (SELECT min(f.priority) FROM {instances} f
                         WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > s.priority)
                  FROM priorities s
                 WHERE s.priority IS NOT NULL
            ), fair_active AS MATERIALIZED (
                SELECT k.fairness_key, k.pass, k.weight, true AS was_active
                  FROM {fair_keys} k
                 WHERE k.queue = $1 AND k.active
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
                   AND NOT EXISTS (SELECT 1 FROM {gate_slots} s
                                    WHERE s.gate = 'fairness.' || $1 AND s.key = k.fairness_key AND s.shard = 0
                                      AND s.held >= s.capacity)
                 ORDER BY k.pass, k.fairness_key
                 LIMIT $2
            ), fair_woken AS MATERIALIZED (
                SELECT k.fairness_key, greatest(k.pass, COALESCE((SELECT min(a.pass) FROM fair_active a), k.pass)) AS pass,
                       k.weight, false AS was_active
                  FROM {fair_keys} k
                 WHERE k.queue = $1 AND NOT k.active AND k.wake_at <= now()
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
                 ORDER BY k.wake_at
                 LIMIT $2
            ), fair_walk AS (
                SELECT w.fairness_key, w.pass, w.was_active,
                       COALESCE(($%5$d::float8[])[array_position($%4$d::text[], w.fairness_key)], w.weight, $%6$d::float8)
                           AS weight
                  FROM (SELECT * FROM fair_active UNION ALL SELECT * FROM fair_woken) w
            ), fair_quota AS MATERIALIZED (
                SELECT f.fairness_key, count(*)::int AS quota FROM (
                    SELECT w.fairness_key FROM fair_walk w CROSS JOIN generate_series(1, $2) j
                     ORDER BY w.pass + j / w.weight, w.fairness_key
                     LIMIT $2) f
                 GROUP BY f.fairness_key
            ), fair_first AS (
                SELECT c.* FROM fair_quota q CROSS JOIN LATERAL (
            """ + CANDIDATE_COLUMNS + """
                       , c.fairness_key
                  FROM (SELECT b.ctid AS row_at, b.priority, b.eligible_at, b.id FROM {instances} b
                         WHERE (b.queue || chr(31) || b.fairness_key) = ($1 || chr(31) || q.fairness_key)
                           AND b.fairness_key = q.fairness_key AND b.status = 'runnable' AND NOT b.key_waiting
                           AND b.fairness_key IS NOT NULL AND b.eligible_at <= now()
                         ORDER BY b.priority, b.eligible_at, b.id
                         LIMIT q.quota * 4) w
                  JOIN {instances} c ON c.ctid = w.row_at
                 WHERE c.status = 'runnable' AND NOT c.key_waiting AND c.eligible_at <= now() AND c.fairness_key = q.fairness_key
            """ + RUNS_HERE + """
                   %3$s
                 ORDER BY w.priority, w.eligible_at, w.id
                 LIMIT q.quota
                   FOR UPDATE OF c SKIP LOCKED) c
            ), fair_short AS (
                SELECT $2 - count(*) AS slots FROM fair_first
            ), fair_more AS (
                SELECT c.*, w.pass + (q.quota + row_number() OVER (PARTITION BY c.fairness_key
                                                                   ORDER BY c.priority, c.eligible_at, c.id)) / w.weight
                           AS finish
                  FROM fair_quota q
                  JOIN fair_walk w ON w.fairness_key = q.fairness_key
                   AND q.quota = (SELECT count(*) FROM fair_first f WHERE f.fairness_key = q.fairness_key)
                 CROSS JOIN LATERAL (
                       SELECT f.priority, f.eligible_at, f.id FROM fair_first f
                        WHERE f.fairness_key = q.fairness_key
                        ORDER BY f.priority DESC, f.eligible_at DESC, f.id DESC
                        LIMIT 1) last
                 CROSS JOIN LATERAL (
            """ + CANDIDATE_COLUMNS + """
                       , c.fairness_key
                  FROM (SELECT b.ctid AS row_at, b.priority, b.eligible_at, b.id FROM {instances} b
                         WHERE (b.queue || chr(31) || b.fairness_key) = ($1 || chr(31) || q.fairness_key)
                           AND b.fairness_key = q.fairness_key AND b.status = 'runnable' AND NOT b.key_waiting
                           AND b.fairness_key IS NOT NULL AND b.eligible_at <= now()
                           AND (b.priority, b.eligible_at, b.id) > (last.priority, last.eligible_at, last.id)
                         ORDER BY b.priority, b.eligible_at, b.id
                         LIMIT (SELECT slots FROM fair_short) * 4) w
                  JOIN {instances} c ON c.ctid = w.row_at
                 WHERE c.status = 'runnable' AND NOT c.key_waiting AND c.eligible_at <= now() AND c.fairness_key = q.fairness_key
            """ + RUNS_HERE + """
                   %3$s
                 ORDER BY w.priority, w.eligible_at, w.id
                 LIMIT (SELECT slots FROM fair_short)
                   FOR UPDATE OF c SKIP LOCKED) c
            ), candidates AS (
                SELECT * FROM fair_first
                UNION ALL
                (SELECT id, type, priority, eligible_at, gate_name, concurrency_key, gate_shard, rate_limit,
                        rate_partition, rate_weight, window_name, window_partition, window_weight, ungated_key,
                        fairness_key
                   FROM fair_more
                  ORDER BY finish, fairness_key
                  LIMIT (SELECT slots FROM fair_short))
            ), one_per_key AS (
                SELECT * FROM (
                    SELECT candidates.*, row_number() OVER (
                               PARTITION BY ungated_key, CASE WHEN ungated_key IS NULL THEN id END
                               ORDER BY priority, eligible_at, id) AS key_rank
                      FROM candidates) ranked
                 WHERE key_rank = 1
            )""";

    /**
     * What a fair pick does to the keys it walked, after it claims the rows of the CTE named by
     * {@code %s} (by id). A key served advances its pass by claims / weight (from the joined virtual
     * time if it was parked). A key with a quota that yielded nothing is looked at once more: with due
     * rows (locked by another pick, or held by a key) it stays active and steps back by one slot, so
     * it cannot hold the head of the walk; with only scheduled rows it parks until the earliest comes
     * due; with none it parks, to be walked once more a second later (a row a concurrent transaction
     * inserted while the key looked active is found then), then for good until a row of it becomes
     * runnable (trigger of migration 10). A woken key without a quota becomes active. Index: the fair
     * keys' primary key; the fair pick index for the look. Locks: the walked keys' rows, in key order,
     * skip locked: the pick never waits on a key row, e.g. one a caller's open transaction holds
     * while its insert activates the key (a pick would stall the queue behind it, or deadlock with a
     * batch insert activating keys in another order). A key skipped so keeps its pass (its claims of
     * this pick go uncounted) and parking and waking are left to the next pick.
     */
    private static final String FAIR_MOVES = """
            , fair_served AS (
                SELECT w.fairness_key, w.pass, w.weight, w.was_active, COALESCE(q.quota, 0) AS quota,
                       (SELECT count(*) FROM one_per_key o
                         WHERE o.fairness_key = w.fairness_key AND o.id IN (SELECT id FROM %s)) AS served
                  FROM fair_walk w LEFT JOIN fair_quota q ON q.fairness_key = w.fairness_key
            ), fair_looked AS (
                SELECT s.*, (SELECT r.eligible_at FROM {instances} r
                              WHERE (r.queue || chr(31) || r.fairness_key) = ($1 || chr(31) || s.fairness_key)
                                AND r.fairness_key = s.fairness_key AND r.status = 'runnable' AND NOT r.key_waiting
                                AND r.fairness_key IS NOT NULL
                              ORDER BY r.priority, r.eligible_at, r.id
                              LIMIT 1) AS next_eligible
                  FROM fair_served s
                 WHERE s.served = 0 AND s.quota > 0
                UNION ALL
                SELECT s.*, NULL FROM fair_served s WHERE s.served > 0 OR (s.quota = 0 AND NOT s.was_active)
            ), fair_locked AS (
                SELECT k.fairness_key FROM {fair_keys} k
                 WHERE k.queue = $1 AND k.fairness_key IN (SELECT fairness_key FROM fair_looked)
                 ORDER BY k.fairness_key
                   FOR UPDATE OF k SKIP LOCKED
            ), fair_moved AS (
                UPDATE {fair_keys} k
                   SET pass = CASE WHEN l.served > 0 THEN CASE WHEN k.active THEN k.pass ELSE greatest(k.pass, l.pass) END
                                                        + l.served / l.weight
                                   WHEN l.quota = 0 THEN greatest(k.pass, l.pass)
                                   WHEN l.next_eligible <= now() THEN k.pass + 1 / l.weight
                                   ELSE k.pass END,
                       active = l.served > 0 OR l.quota = 0 OR COALESCE(l.next_eligible <= now(), false),
                       wake_at = CASE WHEN l.served > 0 OR l.quota = 0 OR l.next_eligible <= now() THEN NULL
                                      WHEN l.next_eligible IS NOT NULL THEN l.next_eligible
                                      WHEN k.active THEN now() + interval '1 second' END
                  FROM fair_locked f JOIN fair_looked l ON l.fairness_key = f.fairness_key
                 WHERE k.queue = $1 AND k.fairness_key = f.fairness_key
                   AND (k.active OR NOT l.was_active)
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
     * True when the sliding window of the row aliased {@code %1$s} (named in its window slot,
     * {@code %2$s} = "window", or in its rate slot as before migration 12, "rate") cannot take the row's
     * weight on top of what its live slots counted; needs the {@code wins} CTE. Index: the windows'
     * primary key. Locks: none.
     */
    private static final String WINDOW_FULL = """
            EXISTS (SELECT 1 FROM {windows} w JOIN wins x ON x.name = w.name
                     WHERE w.name = %1$s.%2$s_name AND w.partition_key = COALESCE(%1$s.%2$s_partition, '')
                       AND (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                             WHERE u.s > floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint - {ring})
                           + %1$s.%2$s_weight > x.lim)""";

    /** What the live slots of window row {@code w} (its {@code wins} row {@code x}) counted. */
    private static final String WINDOW_USED = """
            (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
              WHERE u.s > floor(extract(epoch FROM now()) * 1000 / x.slot_ms)::bigint - {ring})""";

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
     * types and their versions, $13-$15 the sliding windows (name, slot length in ms, limit).
     *
     * <p>A row stacks up to three limits: its gate, its bucket (rate slot) and its window (window slot;
     * a window named in the rate slot, as rows before migration 12 may, counts as its window,
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
     * <p>Index: as {@link #pick} (the head of the queue through the pick index too, priority by
     * priority over the same {@code priorities}), plus the primary
     * keys of the counters, windows and buckets. Locks: the claimed rows (skip locked); the counter
     * and window rows it admits on, locked {@code FOR UPDATE SKIP LOCKED} in key order before their
     * upsert; the bucket rows it upserts, in key order, so two picks lock them in the same order and
     * never deadlock on them (the rows it waits for are buckets only).
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

    /** As {@link #pick} for a fair queue: {@link #FAIR_CANDIDATES}, then {@link #FAIR_MOVES}; $7-$9 the weights. */
    private final String fairPick;

    /** As {@link #pickWithLimits} for a fair queue: {@link #FAIR_CANDIDATES}, then {@link #FAIR_MOVES}; $16-$18 the weights. */
    private final @Nullable String fairPickWithLimits;

    /**
     * Priority aging of queue $1: runnable rows due at least a step ($2 ms, database clock) ago whose
     * priority is above (less urgent than) $3 gain one level and spend one step of their wait (their
     * eligible time moves a step later, still in the past), at most $4 of them, least urgent
     * priorities first and oldest first within each; returns how many. So a row gains exactly one
     * level per step it has waited, down to the floor, however often this runs, and the pick index's
     * order stays the pick's order (the entry moves with the new priority; within its new level the
     * row sorts by when it reached it).
     * Index: the pick index, one range per distinct priority above the floor (a recursive descent,
     * as the pick's), reading only rows due before the step. Locks: the aged rows (skip locked, so
     * a pick in progress is never waited on).
     */
    private final String age;

    /**
     * The keys of queue $1 next in line (active, least pass first, at most $2) and their stored
     * weights, for the scheduler to weigh. Index: the fair keys' pass index. Locks: none.
     */
    private final String keysInLine;

    /**
     * Stores weights $3 of keys $2 of queue $1 where they differ. Index: the fair keys' primary key.
     * Locks: the rows it changes.
     */
    private final String storeWeights;

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
                        "AND c.gate_name IS NULL AND c.rate_limit IS NULL AND c.window_name IS NULL")
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
                + "     OR (c.rate_limit = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c", "rate").replace("c.rate_name", "c.rate_limit") + "))\n"
                + "AND (c.window_name IS NULL OR (c.window_name = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c", "window") + "))")
                + """
                , stacked AS (
                    -- A window in the rate slot (rows from before migration 12) is admitted as the row's window.
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
                     CROSS JOIN LATERAL (SELECT g.capacity / g.shards
                                                + CASE WHEN w.gate_shard < g.capacity % g.shards THEN 1 ELSE 0 END
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
                """ + CLAIM.formatted("admitted") + ClaimColumns.SELECT + """
                )
                SELECT claimed.*, throttled.* FROM throttled LEFT JOIN claimed ON true""")
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
        this.lockCandidates = tables.render("WITH RECURSIVE " + CANDIDATES.formatted("$8", "$7", """
                       AND (c.gate_name IS NULL OR (c.gate_name = ANY ($3) AND NOT (
                            (c.gate_name || chr(31) || c.concurrency_key || chr(31) || c.gate_shard) = ANY ($5))))
                       AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($4) AND NOT (
                            (c.rate_limit || chr(31) || COALESCE(c.rate_partition, '')) = ANY ($6))))
                       AND (c.window_name IS NULL OR (c.window_name = ANY ($4) AND NOT (
                            (c.window_name || chr(31) || COALESCE(c.window_partition, '')) = ANY ($6))))""") + """

                SELECT id, type, priority, (extract(epoch FROM eligible_at) * 1000000)::bigint AS eligible_micros, gate_name,
                       concurrency_key, gate_shard, rate_limit, rate_partition, rate_weight, window_name, window_partition,
                       window_weight
                  FROM one_per_key""");
        this.claimLocked = tables.render("""
                UPDATE {instances} i
                   SET status = 'executing', claimed_by = $2, attempt = i.attempt + 1,
                       lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
                 WHERE i.id = ANY($1) AND i.status = 'runnable'
                RETURNING\s""" + ClaimColumns.SELECT);
        this.fairPick = tables.render("WITH RECURSIVE " + FAIR_CANDIDATES.formatted("$6", "$5",
                        "AND c.gate_name IS NULL AND c.rate_limit IS NULL AND c.window_name IS NULL", 7, 8, 9)
                + FAIR_MOVES.formatted("one_per_key")
                + "\n" + CLAIM.formatted("one_per_key") + ClaimColumns.SELECT);
        this.keysInLine = tables.render("SELECT fairness_key, weight FROM {fair_keys} WHERE queue = $1 AND active"
                + " ORDER BY pass, fairness_key LIMIT $2");
        this.storeWeights = tables.render("""
                UPDATE {fair_keys} k SET weight = w.weight
                  FROM unnest($2::text[], $3::float8[]) AS w(fairness_key, weight)
                 WHERE k.queue = $1 AND k.fairness_key = w.fairness_key AND k.weight IS DISTINCT FROM w.weight""");
        this.age = tables.render("""
                WITH RECURSIVE levels AS (
                    SELECT (SELECT max(f.priority) FROM {instances} f
                             WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > $3) AS priority
                    UNION ALL
                    SELECT (SELECT max(f.priority) FROM {instances} f
                             WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > $3 AND f.priority < l.priority)
                      FROM levels l
                     WHERE l.priority IS NOT NULL
                ), aged AS (
                    SELECT a.id FROM levels l CROSS JOIN LATERAL (
                        SELECT i.id FROM {instances} i
                         WHERE i.queue = $1 AND i.status = 'runnable' AND NOT i.key_waiting AND i.priority = l.priority
                           AND i.eligible_at <= now() - $2 * interval '1 millisecond'
                         ORDER BY i.eligible_at, i.id
                         LIMIT $4
                           FOR UPDATE OF i SKIP LOCKED) a
                     LIMIT $4
                )
                UPDATE {instances} i SET priority = i.priority - 1,
                                         eligible_at = i.eligible_at + $2 * interval '1 millisecond'
                  FROM aged a
                 WHERE i.id = a.id AND i.status = 'runnable' AND i.priority > $3""");
        this.fairPickWithLimits = limits ? fairVariant(tables, pickWithLimits, "$12", "$11", 16, "admitted") : null;
    }

    /**
     * The fair variant of a pick rendered from {@link #CANDIDATES}: its candidates replaced by the
     * fair ones (the same columns), and the key moves added after them (with WITH RECURSIVE, a CTE
     * may name one defined later, here the claimed set).
     */
    private static String fairVariant(Tables tables, String rendered, String versions, String types, int firstWeight,
            String claimedSet) {
        int start = rendered.indexOf("priorities AS (");
        int end = rendered.indexOf("WHERE key_rank = 1\n)", start);
        if (start < 0 || end < 0) {
            throw new IllegalStateException("the pick's candidates are not where the fair variant expects them");
        }
        end += "WHERE key_rank = 1\n)".length();
        String filter = rendered.substring(start, end);
        int filterStart = filter.indexOf("AND c.priority = s.priority\n");
        int filterEnd = filter.indexOf("ORDER BY c.priority, c.eligible_at, c.id", filterStart);
        String limitFilter = filter.substring(filterStart + "AND c.priority = s.priority\n".length(), filterEnd).strip();
        String fair = tables.render(FAIR_CANDIDATES.formatted(versions, types, limitFilter, firstWeight,
                firstWeight + 1, firstWeight + 2) + FAIR_MOVES.formatted(claimedSet));
        return rendered.substring(0, start) + fair + rendered.substring(end);
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
     * The weights a fair queue's pick passes: keys and their weights (parallel), and the weight of
     * any other key whose row stores none.
     */
    public record FairShare(String[] keys, Double[] weights, double defaultWeight) {
    }

    /**
     * Claims up to {@code limit} rows of {@code queue} for {@code worker} in one statement, admitting
     * limited rows in it when the engine knows limits ({@link #pickWithLimits}).
     */
    public Mono<Picked> pick(String queue, int limit, String worker, long leaseMillis) {
        return pick(queue, limit, worker, leaseMillis, null);
    }

    /** As {@link #pick(String, int, String, long)}; a fair queue's pick when {@code fair} is not null. */
    public Mono<Picked> pick(String queue, int limit, String worker, long leaseMillis, @Nullable FairShare fair) {
        return db.withConnection(connection -> pickCounting(connection, queue, limit, worker, leaseMillis, fair).flux())
                .single();
    }

    /** As {@link #pick(String, int, String, long)}, on the caller's connection (benchmarks roll it back). */
    public Flux<ClaimedRow> pick(Connection connection, String queue, int limit, String worker, long leaseMillis) {
        return pickCounting(connection, queue, limit, worker, leaseMillis, null).flatMapIterable(Picked::rows);
    }

    /** The text of a fair queue's pick ($1-$6 as {@link #pickText()}, $7-$9 the weights), for EXPLAIN. */
    public String fairPickText() {
        return fairPick;
    }

    private Mono<Picked> pickCounting(Connection connection, String queue, int limit, String worker,
            long leaseMillis, @Nullable FairShare fair) {
        String text = fair == null ? (limits ? pickWithLimits : pick) : (limits ? fairPickWithLimits : fairPick);
        Statement statement = connection.createStatement(text)
                .bind(0, queue).bind(1, limit).bind(2, worker).bind(3, leaseMillis);
        if (!limits) {
            statement.bind(4, types).bind(5, versions);
            bindFair(statement, 6, fair);
            return Flux.from(statement.execute()).concatMap(result -> result.map(ClaimColumns::read)).collectList()
                    .map(rows -> new Picked(rows, Throttled.NONE, Throttled.NONE));
        }
        statement.bind(4, gateNames).bind(5, gateCapacities).bind(6, gateShards)
                .bind(7, rateNames).bind(8, rates).bind(9, bursts).bind(10, types).bind(11, versions)
                .bind(12, windowNames).bind(13, windowSlots).bind(14, windowLimits);
        bindFair(statement, 15, fair);
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

    /** A key next in line in a fair queue, and the weight stored with it (null for none). */
    public record KeyWeight(String key, @Nullable Double weight) {
    }

    /** Up to {@code limit} keys next in line in {@code queue}; see {@link #keysInLine}. */
    public Flux<KeyWeight> keysInLine(String queue, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(keysInLine)
                        .bind(0, queue).bind(1, limit).execute())
                .concatMap(result -> result.map(row -> new KeyWeight(row.get(0, String.class),
                        row.get(1, Double.class)))));
    }

    /** Stores these keys' weights in {@code queue}; see {@link #storeWeights}. */
    public Mono<Long> storeWeights(String queue, List<KeyWeight> weights) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(storeWeights)
                        .bind(0, queue).bind(1, weights.stream().map(KeyWeight::key).toArray(String[]::new))
                        .bind(2, weights.stream().map(KeyWeight::weight).toArray(Double[]::new)).execute())
                        .flatMap(result -> Mono.from(result.getRowsUpdated())))
                .reduce(0L, Long::sum);
    }

    /** Ages up to {@code batch} rows of {@code queue}; see {@link #age}. */
    public Mono<Long> age(String queue, long stepMillis, int floor, int batch) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(age)
                        .bind(0, queue).bind(1, stepMillis).bind(2, floor).bind(3, batch).execute())
                        .flatMap(result -> Mono.from(result.getRowsUpdated())))
                .reduce(0L, Long::sum);
    }

    private static void bindFair(Statement statement, int index, @Nullable FairShare fair) {
        if (fair != null) {
            statement.bind(index, fair.keys()).bind(index + 1, fair.weights()).bind(index + 2, fair.defaultWeight());
        }
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
                ClaimColumns.orZero(row.get("rate_weight", Integer.class)), row.get("window_name", String.class),
                row.get("window_partition", String.class), ClaimColumns.orZero(row.get("window_weight", Integer.class)));
    }
}
