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
 * <p>Of an ungated key's runnable rows only its head is a candidate (the schema's "Key election"):
 * the others carry {@code key_waiting}, which the pick indexes leave out, so every scan here reads
 * {@code NOT key_waiting} beside {@code status = 'runnable'} (or the partial index cannot serve it)
 * and a busy key's backlog costs the pick nothing (benchmarks/README.md, "Pick cost by backlog
 * shape"). The executing-key probe and the try-lock stay as the guard that needs no invariant: a key's head is
 * runnable only while none of its rows executes, so the probe reads one index entry per keyed head.
 *
 * <p>A fair queue ({@code QueueOptions.fairness}) has its own candidate source ({@link #FAIR_WALK}:
 * claims shared across the rows' fairness keys by weight) and moves ({@link #FAIR_MOVES}: the keys'
 * passes advanced, keys without work parked), in the same one statement, with or without limits;
 * the other queues' statements are unchanged. The queue's scheduler also runs {@link #age} (priority
 * aging) and stores the weigher's weights and the cap function's caps ({@link #storeShares}, {@link
 * #resizeCaps}), each at most every few seconds.
 */
public final class PickSql {

    /** What the statements that only lock candidates return of them. */
    private static final String LOCKED_CANDIDATES = """

            SELECT id, type, priority, (extract(epoch FROM eligible_at) * 1000000)::bigint AS eligible_micros, gate_name,
                   concurrency_key, gate_shard, rate_limit, rate_partition, rate_weight, window_name, window_partition,
                   window_weight
              FROM one_per_key""";

    /** What every candidate scan reads of a row (alias {@code c}): one list, so the picks agree on their columns. */
    private static final String CANDIDATE_COLUMNS = """
                SELECT c.id, c.type, c.priority, c.eligible_at, c.gate_name, c.concurrency_key, c.gate_shard,
                       c.rate_limit, COALESCE(c.rate_partition, '') AS rate_partition, c.rate_weight,
                       c.window_name, COALESCE(c.window_partition, '') AS window_partition, c.window_weight,
                       CASE WHEN c.gate_name IS NULL THEN c.concurrency_key END AS ungated_key
            """;

    /**
     * A row of a type, at a version, this engine runs (%1$s the versions, %2$s the types: current
     * versions, then lowest ones). Alone, for a probe that claims nothing and so takes no key guard.
     */
    private static final String KNOWN_VERSION = """
            c.type_version <= (%1$s::int[])[array_position(%2$s::text[], c.type)]
            AND c.type_version >= COALESCE((%1$s::int[])[array_position(%2$s::text[], c.type) + cardinality(%2$s::text[])], 1)""";

    /**
     * The per-row conditions every candidate scan shares (plain, limited, fair): {@link #KNOWN_VERSION},
     * and an ungated concurrency key is neither executing now nor being claimed by another pick (the
     * executing-key probe, then a tried advisory lock on the key's hash). One place, so a guard added
     * here reaches every pick.
     */
    private static final String RUNS_HERE = "AND " + KNOWN_VERSION + """

                   AND (c.concurrency_key IS NULL OR c.gate_name IS NOT NULL OR CASE
                        WHEN EXISTS (SELECT 1 FROM {instances} e
                                      WHERE e.concurrency_key = c.concurrency_key AND e.status = 'executing'
                                        AND e.gate_name IS NULL) THEN false
                        ELSE pg_try_advisory_xact_lock(hashtextextended(c.concurrency_key, 0)) END)
            """;

    /**
     * What a fair pick tells its engine, on its every row: the keys it found foreign to this engine
     * ({@link #FAIR_MOVES}), and whether it walked a key whose cap was never asked for.
     */
    private static final String FAIR_REPORT = "(SELECT array_agg(fairness_key ORDER BY fairness_key) FROM fair_foreign)"
            + " AS foreign_keys, (SELECT bool_or(cap IS NULL) FROM fair_walk) AS unasked";

    /**
     * The queue's distinct runnable priorities in ascending order, one index-only descent each
     * ({@code min(priority) > previous}): the skip over future rows the class describes (the statement
     * starts WITH RECURSIVE for it). Every pick defines it first; the plain scan reads through it, and
     * so does the limited pick's count of the head of the queue.
     */
    private static final String PRIORITIES = """
            priorities AS (
                SELECT (SELECT min(f.priority) FROM {instances} f WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting) AS priority
                UNION ALL
                SELECT (SELECT min(f.priority) FROM {instances} f
                         WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > s.priority)
                  FROM priorities s
                 WHERE s.priority IS NOT NULL
            )""";

    /**
     * The plain candidate source: for each priority of {@link #PRIORITIES}, a lateral scan of the
     * pick index range (queue, priority, ..now()], with {@code {runs_here}} ({@link #RUNS_HERE} for the
     * statement's versions and types: a row of another type, or of a newer version, is left for an
     * engine that knows it, so a rolling deploy never fails work an old node cannot run; so is a row
     * older than the oldest version the engine can migrate from: no migration path, it waits, visible
     * as unserved work; the versions parameter holds each type's current version, then, at the same
     * position plus the number of types, its lowest; two plain int comparisons, as a range type would
     * be cast from text on every row under a generic plan) and {@code {limit_filter}} (which limited
     * rows this statement may take). The
     * key probe, the advisory lock and the row lock are taken inside the lateral, so only rows the
     * outer LIMIT pulls are ever locked.
     */
    private static final String PLAIN_SCAN = """
            , candidates AS (
                SELECT c.* FROM priorities s CROSS JOIN LATERAL (
            """ + CANDIDATE_COLUMNS + """
                  FROM {instances} c
                 WHERE c.queue = $1 AND c.status = 'runnable' AND NOT c.key_waiting AND c.eligible_at <= now()
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
                   {runs_here}
                   AND c.priority = s.priority
                   {limit_filter}
                 ORDER BY c.priority, c.eligible_at, c.id
                 LIMIT $2
                   FOR UPDATE OF c SKIP LOCKED) c
                 LIMIT $2
            )""";

    /**
     * The one-per-key guard every source ends with: of the locked {@code candidates}, at most one
     * per ungated key, the most urgent.
     */
    private static final String ONE_PER_KEY = """
            , one_per_key AS (
                SELECT * FROM (
                    SELECT candidates.*, row_number() OVER (
                               PARTITION BY ungated_key, CASE WHEN ungated_key IS NULL THEN id END
                               ORDER BY priority, eligible_at, id) AS key_rank
                      FROM candidates) ranked
                 WHERE key_rank = 1
            )""";

    /**
     * The fair candidate source ({@code Fairness}), in place of {@link #PLAIN_SCAN}: the same columns
     * (and the row's key), the same {@code {runs_here}} and {@code {limit_filter}}, the same
     * {@code candidates} for {@link #ONE_PER_KEY}, shared across keys by stride scheduling.
     * <ul>
     * <li>The walk reads the queue's active keys in pass order (their pass index), at most $2, plus
     *     parked keys whose scheduled rows came due (their wake index), which join at the queue's
     *     virtual time (the least pass walked); keys without work are parked and cost nothing. A key
     *     at its cap (the queue's cap gate, {@code Fairness.capGate}, full for it: its counter holds
     *     the key's own cap, stored with the key by its scheduler, else the gate's) is stepped over;
     *     the walk carries the key's cap to the admission ({@link #FAIR_KEY_CAP}). A key whose cap
     *     its queue's function has not been asked for yet ({@code cap} null) is held to
     *     {@code {unknown_cap}} (1 on a queue capped by a function, else null: the gate's), and the
     *     statement says it walked one ({@link #FAIR_REPORT}), so its engine asks at once. Keys this engine
     *     found foreign a moment ago ({@code {foreign}}, see {@link #FAIR_MOVES}) are stepped over.
     * <li>Each walked key is offered slots j = 1..$2 finishing at pass + j / weight; the $2 earliest
     *     finishes are the pick's quotas. Weights: the pick's arrays of keys and weights
     *     ({@code {weighed_keys}}, {@code {weights}}: their parameters), else the weight stored with
     *     the key, else the default ({@code {default_weight}}).
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
     * skip). The statement still defines {@link #PRIORITIES} first: the limited pick reads the head
     * of the queue through it.
     */
    private static final String FAIR_WALK = """
            , fair_active AS MATERIALIZED (
                SELECT k.fairness_key, k.pass, k.weight, k.cap, true AS was_active
                  FROM {fair_keys} k
                 WHERE k.queue = $1 AND k.active AND k.fairness_key <> ALL ({foreign}::text[])
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
                   AND NOT EXISTS (SELECT 1 FROM {gate_slots} s
                                    WHERE s.gate = 'fairness.' || $1 AND s.key = k.fairness_key AND s.shard = 0
                                      AND s.held >= COALESCE(CASE WHEN k.cap IS NULL THEN {unknown_cap}::int
                                                                  ELSE NULLIF(k.cap, 0) END, s.capacity))
                 ORDER BY k.pass, k.fairness_key
                 LIMIT $2
            ), fair_woken AS MATERIALIZED (
                SELECT k.fairness_key, greatest(k.pass, COALESCE((SELECT min(a.pass) FROM fair_active a), k.pass)) AS pass,
                       k.weight, k.cap, false AS was_active
                  FROM {fair_keys} k
                 WHERE k.queue = $1 AND NOT k.active AND k.wake_at <= now() AND k.fairness_key <> ALL ({foreign}::text[])
                   AND NOT EXISTS (SELECT 1 FROM {queue_pauses} q WHERE q.queue = $1)
                 ORDER BY k.wake_at
                 LIMIT $2
            ), fair_walk AS (
                SELECT w.fairness_key, w.pass, w.was_active, w.cap,
                       COALESCE(({weights}::float8[])[array_position({weighed_keys}::text[], w.fairness_key)],
                                w.weight, {default_weight}::float8) AS weight
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
                   {runs_here}
                   {limit_filter}
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
                   {runs_here}
                   {limit_filter}
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
            )""";

    /**
     * What a fair pick does to the keys it walked, after it claims the rows of the CTE named by
     * {@code {claimed}} (by id). A key served advances its pass by claims / weight (from the joined virtual
     * time if it was parked). A key with a quota that yielded nothing is looked at once more: with due
     * rows (locked by another pick, or held by a key) it stays active and steps back by one slot, so
     * it cannot hold the head of the walk; with only scheduled rows it parks until the earliest comes
     * due; with none it parks, to be walked once more a second later (a row a concurrent transaction
     * inserted while the key looked active is found then), then for good until a row of it becomes
     * runnable (trigger durable_fair_activate). A woken key without a quota becomes active. Index: the fair
     * keys' primary key; the fair pick index for the look. Locks: the walked keys' rows, in key order,
     * skip locked: the pick never waits on a key row, e.g. one a caller's open transaction holds
     * while its insert activates the key (a pick would stall the queue behind it, or deadlock with a
     * batch insert activating keys in another order). A key skipped so keeps its pass (its claims of
     * this pick go uncounted) and parking and waking are left to the next pick.
     *
     * <p>A key served nothing whose first due rows (as many as its lateral read) are all of types or
     * versions this engine does not run ({@code {known_version}}: {@link #KNOWN_VERSION}) is foreign to
     * this engine ({@code fair_foreign}): the statement returns such keys ({@link #FAIR_REPORT}), and
     * the scheduler steps over them in its next picks for a while, so they cost it one bounded look,
     * not one per pick, and cannot fill its walk. Such a key still steps back a slot, as any key with
     * due rows that yielded nothing: with types no engine runs, it must not hold the head of every walk.
     */
    private static final String FAIR_MOVES = """
            , fair_served AS (
                SELECT w.fairness_key, w.pass, w.weight, w.was_active, COALESCE(q.quota, 0) AS quota,
                       (SELECT count(*) FROM one_per_key o
                         WHERE o.fairness_key = w.fairness_key AND o.id IN (SELECT id FROM {claimed})) AS served
                  FROM fair_walk w LEFT JOIN fair_quota q ON q.fairness_key = w.fairness_key
            ), fair_foreign AS (
                SELECT s.fairness_key FROM fair_served s
                 CROSS JOIN LATERAL (
                       SELECT count(*) AS due, count(*) FILTER (WHERE {known_version}) AS known
                         FROM (SELECT c.type, c.type_version FROM {instances} c
                                WHERE (c.queue || chr(31) || c.fairness_key) = ($1 || chr(31) || s.fairness_key)
                                  AND c.fairness_key = s.fairness_key AND c.status = 'runnable' AND NOT c.key_waiting
                                  AND c.fairness_key IS NOT NULL AND c.eligible_at <= now()
                                ORDER BY c.priority, c.eligible_at, c.id
                                LIMIT s.quota * 4) c) r
                 WHERE s.served = 0 AND s.quota > 0 AND r.due > 0 AND r.known = 0
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
     * {@code %2$s} = "window", or in its rate slot, "rate", when that names a window) cannot take the
     * row's weight on top of what its live slots counted; needs the {@code wins} CTE. Index: the windows'
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

    /**
     * Claims the rows of the CTE named by {@code {claimed}} for worker $3 with a lease of $4 ms. The ids
     * come as one array ({@code = ANY}, as the commit statements take theirs), not as a join: a join's
     * plan follows the statistics, and a generic plan made while the hot table was empty joined the
     * claimed rows to a sequential scan of it, re-reading them once per row of the table (10 s for a
     * pick of 256 over 20,000 rows). An array is one index probe per id, or at worst one scan.
     */
    private static final String CLAIM = """
            UPDATE {instances} i
               SET status = 'executing', claimed_by = $3, attempt = i.attempt + 1,
                   lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
             WHERE i.id = ANY (ARRAY(SELECT m.id FROM {claimed} m))
            RETURNING\s""";

    /**
     * The limits a limited pick admits, as tables: the gates ($5-$7: name, capacity, shards), the
     * rate limits ($8-$10: name, tokens a second, burst) and the sliding windows ($13-$15: name, slot
     * length in ms, limit). They come first in its WITH RECURSIVE, before the candidate source.
     */
    private static final String LIMIT_TABLES = """
            gates AS (
                SELECT * FROM unnest($5::text[], $6::int[], $7::int[]) AS g(name, capacity, shards)
            ), rates AS (
                SELECT * FROM unnest($8::text[], $9::float8[], $10::int[]) AS r(name, rate, burst)
            ), wins AS (
                SELECT * FROM unnest($13::text[], $14::bigint[], $15::int[]) AS x(name, slot_ms, lim)
            )""";

    /** The limit filter of a statement that takes no limited rows (an engine that knows no limits). */
    private static final String NO_LIMITS = "AND c.gate_name IS NULL AND c.rate_limit IS NULL AND c.window_name IS NULL";

    /**
     * The limit filter of the limited pick: a limited row of a limit this engine knows, whose gate
     * counter, bucket or window is not already known to be full (so throttled rows never crowd
     * unrelated work out of the pick's LIMIT).
     */
    private static final String LIMITED_FILTER =
            "AND (c.gate_name IS NULL OR (c.gate_name = ANY ($5) AND NOT " + GATE_FULL.formatted("c") + "))\n"
            + "AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($8) AND NOT " + BUCKET_SHORT.formatted("c") + ")\n"
            + "     OR (c.rate_limit = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c", "rate").replace("c.rate_name", "c.rate_limit") + "))\n"
            + "AND (c.window_name IS NULL OR (c.window_name = ANY ($13) AND NOT " + WINDOW_FULL.formatted("c", "window") + "))";

    /**
     * The limit filter of the first half of the pick with a limiter outside the database: limited rows
     * of the limits this engine knows ($3 gates, $4 rate slots), but not those of a (gate, key, shard) or
     * (limit, partition) the limiter refused a moment ago ($5, $6).
     */
    private static final String REMOTE_LIMITS_FILTER = """
            AND (c.gate_name IS NULL OR (c.gate_name = ANY ($3) AND NOT (
                 (c.gate_name || chr(31) || c.concurrency_key || chr(31) || c.gate_shard) = ANY ($5))))
            AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($4) AND NOT (
                 (c.rate_limit || chr(31) || COALESCE(c.rate_partition, '')) = ANY ($6))))
            AND (c.window_name IS NULL OR (c.window_name = ANY ($4) AND NOT (
                 (c.window_name || chr(31) || COALESCE(c.window_partition, '')) = ANY ($6))))""";

    /**
     * The capacity of gate row {@code w}'s counter in the fair limited pick: on the queue's cap gate,
     * the cap stored with the row's key (walked by {@link #FAIR_WALK}, so no read; {@code {unknown_cap}}
     * when none is yet), null for the gate's own (a stored 0: the function gave the key none). The counter is upserted with it, so it holds the key's cap from then on.
     */
    private static final String FAIR_KEY_CAP = """
            (SELECT CASE WHEN fw.cap IS NULL THEN {unknown_cap}::int ELSE NULLIF(fw.cap, 0) END FROM fair_walk fw
              WHERE w.gate_name = 'fairness.' || $1 AND fw.fairness_key = w.concurrency_key)""";

    /**
     * What the limited pick does after its candidate source: admits the rows of {@code one_per_key}
     * all or nothing across their limits, claims those admitted ({@code admitted}), and counts what
     * the limits held back ({@link #pickWithLimits} tells how). {@code {key_cap}}: the capacity of a
     * row's gate counter when it is not the gate's share per shard ({@link #FAIR_KEY_CAP}, or null);
     * {@code {report}}: more columns for its rows ({@link #FAIR_REPORT}, or none).
     * Its {@code {refilled}}, {@code {fits}}, {@code {pos}}, {@code {window_used}} and {@code {ring}}
     * are filled by {@link #limited}.
     */
    private static final String LIMITED_ADMISSION = """
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
     * As {@link #lockCandidates} for a fair queue ({@link #fairSource} with the same filter, $9-$11
     * the weights, $12 the keys to step over, $13 null: a Redis limiter keeps no per-key caps in the
     * database), and {@link #FAIR_MOVES} counting every locked candidate as served: the keys' passes
     * advance by what they were offered, so a key whose rows the limiter then refuses (its cap gate
     * full in Redis, or another of its limits) has spent those turns, as a key at its cap is stepped
     * over by the PostgreSQL pick. Index and locks: as the fair pick's, until the transaction ends.
     */
    private final String fairLockCandidates;

    /**
     * The second half: claims the locked rows $1 for worker $2 with a lease of $3 ms.
     * Index: primary key. Locks: the rows, which the transaction already holds.
     */
    private final String claimLocked;

    /**
     * As {@link #pick} for a fair queue: {@link #fairSource} (the fair walk and its key moves); $7-$9 the
     * weights, $10 the keys to step over, $11 the cap of a key not asked yet. Returns one row more when it claims nothing (the claimed
     * columns null), as every row carries the foreign keys ({@link #FAIR_REPORT}).
     */
    private final String fairPick;

    /** As {@link #pickWithLimits} for a fair queue: {@link #fairSource} in it; $16-$18 the weights, $19 the keys to step over, $20 the cap of a key not asked yet. */
    private final @Nullable String fairPickWithLimits;

    /**
     * Priority aging of queue $1: runnable rows due at least a step ($2 ms, database clock) ago whose
     * priority is above (less urgent than) $3 gain one level and spend one step of their wait (their
     * eligible time moves a step later, still in the past), at most $4 of them; returns how many. So
     * a row gains exactly one level per step it has waited, down to the floor, however often this
     * runs, and the pick index's order stays the pick's order (the entry moves with the new
     * priority; within its new level the row sorts by when it reached it).
     *
     * <p>When more rows are due for a step than one run lifts, the levels take turns: each level's
     * oldest row, least urgent level first, then each level's second oldest, and so on; so a large
     * backlog in one level delays no other level's aging, and which rows a run lifts is fixed by the
     * rows (priority, eligible time, id), not by the plan. Bounds: the levels are read without locks,
     * each at most $4 rows (fewer when there are more than eight levels: eight times $4 rows in all,
     * plus one descent per level), and only the rows chosen are then locked and rewritten, at most
     * $4, in id order.
     * Index: the pick index, one range per distinct priority above the floor (a recursive descent,
     * as the pick's), reading only rows due before the step; the primary key for the lock. Locks:
     * the aged rows (skip locked, so a pick in progress is never waited on).
     */
    private final String age;

    /**
     * The keys of queue $1 next in line (active, least pass first, at most $2) and their stored
     * weights and caps, for the scheduler to weigh and cap. Index: the fair keys' pass index. Locks: none.
     */
    private final String keysInLine;

    /**
     * Stores weights $3 and caps $4 of keys $2 of queue $1 where they differ. Index: the fair keys'
     * primary key. Locks: the rows it changes.
     */
    private final String storeShares;

    /**
     * Sets the capacity of the cap gate's counters of keys $2 of queue $1 to their stored cap, else
     * (0: the function gave none) the gate's $3, where it differs: every reader of a counter (the pick's filters and its walk, the
     * admin's limits) sees a changed cap at once, not only after the pick next admits on it. Its own
     * statement, after {@link #storeShares}, so no transaction holds key rows while it waits on a
     * counter. Index: the fair keys' and the counters' primary keys. Locks: the counters it changes.
     */
    private final String resizeCaps;

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
        this.pick = tables.render("WITH RECURSIVE " + plainSource("$6", "$5", NO_LIMITS)
                + "\n" + fill(CLAIM, "claimed", "one_per_key") + ClaimColumns.SELECT);
        this.pickWithLimits = limited(tables, plainSource("$12", "$11", LIMITED_FILTER), "NULL::int", "");
        this.lockCandidates = tables.render("WITH RECURSIVE " + plainSource("$8", "$7", REMOTE_LIMITS_FILTER)
                + LOCKED_CANDIDATES);
        this.fairLockCandidates = tables.render("WITH RECURSIVE "
                + fairSource("$8", "$7", REMOTE_LIMITS_FILTER, 9, "one_per_key") + LOCKED_CANDIDATES);
        this.claimLocked = tables.render("""
                UPDATE {instances} i
                   SET status = 'executing', claimed_by = $2, attempt = i.attempt + 1,
                       lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
                 WHERE i.id = ANY($1) AND i.status = 'runnable'
                RETURNING\s""" + ClaimColumns.SELECT);
        this.fairPick = tables.render("WITH RECURSIVE " + fairSource("$6", "$5", NO_LIMITS, 7, "one_per_key")
                + ", claimed AS (\n" + fill(CLAIM, "claimed", "one_per_key") + ClaimColumns.SELECT + "\n)\n"
                + "SELECT claimed.*, " + FAIR_REPORT + " FROM (SELECT) AS one LEFT JOIN claimed ON true");
        this.keysInLine = tables.render("SELECT fairness_key, weight, cap FROM {fair_keys} WHERE queue = $1 AND active"
                + " ORDER BY pass, fairness_key LIMIT $2");
        this.storeShares = tables.render("""
                UPDATE {fair_keys} k SET weight = w.weight, cap = w.cap
                  FROM unnest($2::text[], $3::float8[], $4::int[]) AS w(fairness_key, weight, cap)
                 WHERE k.queue = $1 AND k.fairness_key = w.fairness_key
                   AND (k.weight IS DISTINCT FROM w.weight OR k.cap IS DISTINCT FROM w.cap)""");
        this.resizeCaps = tables.render("""
                UPDATE {gate_slots} s SET capacity = COALESCE(NULLIF(k.cap, 0), $3)
                  FROM {fair_keys} k
                 WHERE k.queue = $1 AND k.fairness_key = ANY ($2::text[])
                   AND s.gate = 'fairness.' || $1 AND s.key = k.fairness_key AND s.shard = 0
                   AND s.capacity <> COALESCE(NULLIF(k.cap, 0), $3)""");
        this.age = tables.render("""
                WITH RECURSIVE levels AS (
                    SELECT (SELECT max(f.priority) FROM {instances} f
                             WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > $3) AS priority
                    UNION ALL
                    SELECT (SELECT max(f.priority) FROM {instances} f
                             WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > $3 AND f.priority < l.priority)
                      FROM levels l
                     WHERE l.priority IS NOT NULL
                ), share AS (
                    SELECT least($4, ceil($4 * 8.0 / greatest(count(*), 1)))::int AS rows
                      FROM levels WHERE priority IS NOT NULL
                ), due AS (
                    SELECT d.id, d.priority,
                           row_number() OVER (PARTITION BY d.priority ORDER BY d.eligible_at, d.id) AS turn
                      FROM levels l CROSS JOIN LATERAL (
                           SELECT i.id, i.priority, i.eligible_at FROM {instances} i
                            WHERE i.queue = $1 AND i.status = 'runnable' AND NOT i.key_waiting AND i.priority = l.priority
                              AND i.eligible_at <= now() - $2 * interval '1 millisecond'
                            ORDER BY i.eligible_at, i.id
                            LIMIT (SELECT rows FROM share)) d
                ), chosen AS (
                    SELECT id FROM due ORDER BY turn, priority DESC LIMIT $4
                ), aged AS (
                    SELECT i.id FROM {instances} i
                     WHERE i.id IN (SELECT id FROM chosen) AND i.status = 'runnable' AND i.priority > $3
                       AND i.eligible_at <= now() - $2 * interval '1 millisecond'
                     ORDER BY i.id
                       FOR UPDATE OF i SKIP LOCKED
                )
                UPDATE {instances} i SET priority = i.priority - 1,
                                         eligible_at = i.eligible_at + $2 * interval '1 millisecond'
                  FROM aged a
                 WHERE i.id = a.id AND i.status = 'runnable' AND i.priority > $3""");
        this.fairPickWithLimits = limits
                ? limited(tables, fairSource("$12", "$11", LIMITED_FILTER, 16, "admitted"),
                        fill(FAIR_KEY_CAP, "unknown_cap", "$20"), ", " + FAIR_REPORT) : null;
    }

    /**
     * The plain candidate source of a statement whose known versions and types are the parameters
     * named {@code versions} and {@code types}, taking the limited rows {@code limitFilter} lets
     * through: {@link #PRIORITIES}, {@link #PLAIN_SCAN}, {@link #ONE_PER_KEY}.
     */
    private static String plainSource(String versions, String types, String limitFilter) {
        return PRIORITIES + fill(PLAIN_SCAN, "runs_here", runsHere(versions, types), "limit_filter", limitFilter)
                + ONE_PER_KEY;
    }

    /**
     * The fair candidate source, as {@link #plainSource}, with the weights in parameters
     * {@code firstWeight} to {@code firstWeight + 2} (keys, their weights, the default), the keys to
     * step over as foreign in the next ({@code firstWeight + 3}), the cap of a key not asked yet
     * ({@code firstWeight + 4}), and the key
     * moves after the rows of {@code claimed} are claimed: {@link #PRIORITIES}, {@link #FAIR_WALK},
     * {@link #ONE_PER_KEY}, {@link #FAIR_MOVES} (with WITH RECURSIVE, a CTE may name one defined later,
     * here the claimed set).
     */
    private static String fairSource(String versions, String types, String limitFilter, int firstWeight,
            String claimed) {
        return PRIORITIES + fill(FAIR_WALK, "runs_here", runsHere(versions, types), "limit_filter", limitFilter,
                        "weighed_keys", "$" + firstWeight, "weights", "$" + (firstWeight + 1),
                        "default_weight", "$" + (firstWeight + 2), "foreign", "$" + (firstWeight + 3),
                        "unknown_cap", "$" + (firstWeight + 4))
                + ONE_PER_KEY + fill(FAIR_MOVES, "claimed", claimed,
                        "known_version", KNOWN_VERSION.formatted(versions, types));
    }

    /** {@link #RUNS_HERE} for the parameters named {@code versions} and {@code types}. */
    private static String runsHere(String versions, String types) {
        return RUNS_HERE.formatted(versions, types).strip();
    }

    /**
     * The limited pick around a candidate source ({@link #plainSource} or {@link #fairSource} with
     * {@link #LIMITED_FILTER}, parameters $11-$12): {@link #LIMIT_TABLES}, the source,
     * {@link #LIMITED_ADMISSION} with {@code keyCap} and {@code report}, its refill and window expressions filled in.
     */
    private static String limited(Tables tables, String source, String keyCap, String report) {
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

    /**
     * Fills a fragment's named placeholders ({@code {name}}, each given as a name and its text), every
     * occurrence; a name the fragment does not hold is a mistake in this class, so it fails when the
     * engine builds its statements, never on a pick.
     */
    private static String fill(String fragment, String... namesAndTexts) {
        String filled = fragment;
        for (int i = 0; i < namesAndTexts.length; i += 2) {
            String placeholder = "{" + namesAndTexts[i] + "}";
            if (!filled.contains(placeholder)) {
                throw new IllegalStateException("no placeholder " + placeholder + " in a pick fragment");
            }
            filled = filled.replace(placeholder, namesAndTexts[i + 1]);
        }
        return filled;
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

    /**
     * What one pick claimed, what full gates and empty buckets held back, and (a fair pick) the keys it
     * found foreign to this engine: due rows, none of a type and version it runs ({@link #FAIR_MOVES}),
     * and whether it walked a key whose cap was never asked for ({@link #FAIR_REPORT}).
     */
    public record Picked(List<ClaimedRow> rows, Throttled byGate, Throttled byRate, List<String> foreignKeys,
            boolean unasked) {

        public Picked(List<ClaimedRow> rows, Throttled byGate, Throttled byRate) {
            this(rows, byGate, byRate, List.of(), false);
        }
    }

    /**
     * The weights a fair queue's pick passes: keys and their weights (parallel), and the weight of
     * any other key whose row stores none; the keys its walk steps over, found foreign to this
     * engine by an earlier pick; and the cap of a key whose cap was never asked for (null: the gate's).
     */
    public record FairShare(String[] keys, Double[] weights, double defaultWeight, String[] foreign,
            @Nullable Integer unknownCap) {

        public FairShare(String[] keys, Double[] weights, double defaultWeight) {
            this(keys, weights, defaultWeight, new String[0], null);
        }

        /** These weights, stepping over {@code foreign}. */
        public FairShare steppingOver(String[] foreign) {
            return new FairShare(keys, weights, defaultWeight, foreign, unknownCap);
        }

        /** These weights, holding a key whose cap was never asked for to {@code cap} claims. */
        public FairShare capping(@Nullable Integer cap) {
            return new FairShare(keys, weights, defaultWeight, foreign, cap);
        }
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

    /**
     * The text of a fair queue's pick ($1-$6 as {@link #pickText()}, $7-$9 the weights, $10 the keys to
     * step over), for EXPLAIN.
     */
    public String fairPickText() {
        return fairPick;
    }

    private Mono<Picked> pickCounting(Connection connection, String queue, int limit, String worker,
            long leaseMillis, @Nullable FairShare fair) {
        String text = fair == null ? (limits ? pickWithLimits : pick) : (limits ? fairPickWithLimits : fairPick);
        Statement statement = connection.createStatement(text)
                .bind(0, queue).bind(1, limit).bind(2, worker).bind(3, leaseMillis);
        if (!limits && fair == null) {
            statement.bind(4, types).bind(5, versions);
            return Flux.from(statement.execute()).concatMap(result -> result.map(ClaimColumns::read)).collectList()
                    .map(rows -> new Picked(rows, Throttled.NONE, Throttled.NONE));
        }
        if (!limits) {
            statement.bind(4, types).bind(5, versions);
            bindFair(statement, 6, fair);
        } else {
            statement.bind(4, gateNames).bind(5, gateCapacities).bind(6, gateShards)
                    .bind(7, rateNames).bind(8, rates).bind(9, bursts).bind(10, types).bind(11, versions)
                    .bind(12, windowNames).bind(13, windowSlots).bind(14, windowLimits);
            bindFair(statement, 15, fair);
        }
        // Every row carries the counts (and a fair pick's foreign keys); a row that claims nothing only them.
        Throttled[] held = {Throttled.NONE, Throttled.NONE};
        java.util.concurrent.atomic.AtomicReference<List<String>> foreign =
                new java.util.concurrent.atomic.AtomicReference<>(List.of());
        boolean[] unasked = {false};
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(row -> {
                    if (limits) {
                        held[0] = throttled(row, "gate");
                        held[1] = throttled(row, "rate");
                    }
                    if (fair != null) {
                        String[] keys = row.get("foreign_keys", String[].class);
                        foreign.set(keys == null ? List.of() : List.of(keys));
                        unasked[0] = Boolean.TRUE.equals(row.get("unasked", Boolean.class));
                    }
                    return row.get("id", Long.class) == null ? Optional.<ClaimedRow>empty()
                            : Optional.of(ClaimColumns.read(row));
                }))
                .filter(Optional::isPresent).map(Optional::get)
                .collectList()
                .map(rows -> new Picked(rows, held[0], held[1], foreign.get(), unasked[0]));
    }

    /** A key next in line in a fair queue, and the weight and cap stored with it (null for none). */
    public record KeyShare(String key, @Nullable Double weight, @Nullable Integer cap) {
    }

    /** Up to {@code limit} keys next in line in {@code queue}; see {@link #keysInLine}. */
    public Flux<KeyShare> keysInLine(String queue, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(keysInLine)
                        .bind(0, queue).bind(1, limit).execute())
                .concatMap(result -> result.map(row -> new KeyShare(row.get(0, String.class),
                        row.get(1, Double.class), row.get(2, Integer.class)))));
    }

    /**
     * Stores these keys' weights and caps in {@code queue} ({@link #storeShares}), then, when the
     * queue caps keys ({@code capGateCapacity} above 0: the cap gate's own capacity), resizes their
     * counters ({@link #resizeCaps}); returns how many keys changed.
     */
    public Mono<Long> storeShares(String queue, List<KeyShare> shares, int capGateCapacity) {
        String[] keys = shares.stream().map(KeyShare::key).toArray(String[]::new);
        return db.withConnection(connection -> Flux.from(connection.createStatement(storeShares)
                                .bind(0, queue).bind(1, keys)
                                .bind(2, shares.stream().map(KeyShare::weight).toArray(Double[]::new))
                                .bind(3, shares.stream().map(KeyShare::cap).toArray(Integer[]::new)).execute())
                        .flatMap(result -> Mono.from(result.getRowsUpdated()))
                        .reduce(0L, Long::sum)
                        .flatMap(changed -> capGateCapacity <= 0 ? Mono.just(changed)
                                : Flux.from(connection.createStatement(resizeCaps)
                                                .bind(0, queue).bind(1, keys).bind(2, capGateCapacity).execute())
                                        .flatMap(result -> Mono.from(result.getRowsUpdated()))
                                        .then(Mono.just(changed)))
                        .flux())
                .single();
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
            statement.bind(index, fair.keys()).bind(index + 1, fair.weights()).bind(index + 2, fair.defaultWeight())
                    .bind(index + 3, fair.foreign());
            if (fair.unknownCap() == null) {
                statement.bindNull(index + 4, Integer.class);
            } else {
                statement.bind(index + 4, fair.unknownCap());
            }
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
        return lockCandidates(connection, queue, limit, refusedGates, refusedRates, null);
    }

    /** As above, shared across keys when {@code fair} is given ({@link #fairLockCandidates}). */
    public Flux<Candidate> lockCandidates(Connection connection, String queue, int limit, String[] refusedGates,
            String[] refusedRates, @Nullable FairShare fair) {
        Statement statement = connection.createStatement(fair == null ? lockCandidates : fairLockCandidates)
                .bind(0, queue).bind(1, limit).bind(2, gateNames).bind(3, rateSlotNames)
                .bind(4, refusedGates).bind(5, refusedRates).bind(6, types).bind(7, versions);
        if (fair != null) {
            statement.bind(8, fair.keys()).bind(9, fair.weights()).bind(10, fair.defaultWeight())
                    .bind(11, fair.foreign()).bindNull(12, Integer.class);
        }
        return Flux.from(statement.execute()).concatMap(result -> result.map(PickSql::toCandidate));
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
