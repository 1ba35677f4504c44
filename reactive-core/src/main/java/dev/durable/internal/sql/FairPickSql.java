package dev.durable.internal.sql;

import static dev.durable.internal.sql.CandidateSql.CANDIDATE_COLUMNS;
import static dev.durable.internal.sql.CandidateSql.CLAIM;
import static dev.durable.internal.sql.CandidateSql.KNOWN_VERSION;
import static dev.durable.internal.sql.CandidateSql.NO_LIMITS;
import static dev.durable.internal.sql.CandidateSql.ONE_PER_KEY;
import static dev.durable.internal.sql.CandidateSql.PRIORITIES;
import static dev.durable.internal.sql.CandidateSql.fill;
import static dev.durable.internal.sql.CandidateSql.runsHere;

import dev.durable.internal.Db;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The fair pick ({@code QueueOptions.fairness}): a fair queue has its own candidate source
 * ({@link #FAIR_WALK}: claims shared across the rows' fairness keys by weight) and moves
 * ({@link #FAIR_MOVES}: the keys' passes advanced, keys without work parked), in the same one
 * statement, with or without limits ({@link #fairPick}, {@link #fairPickWithLimits}, which
 * {@link PickSql} runs; {@link LockedPickSql} locks a fair queue's candidates with the same source);
 * the other queues' statements are unchanged. The queue's scheduler also stores the weigher's
 * weights and the cap function's caps ({@link #storeShares}, {@link #resizeCaps}), at most every few
 * seconds.
 */
public final class FairPickSql {

    /**
     * What a fair pick tells its engine, on its every row: the keys it found foreign to this engine
     * ({@link #FAIR_MOVES}), and whether it walked a key whose cap was never asked for.
     */
    static final String FAIR_REPORT = "(SELECT array_agg(fairness_key ORDER BY fairness_key) FROM fair_foreign)"
            + " AS foreign_keys, (SELECT bool_or(cap IS NULL) FROM fair_walk) AS unasked";

    /**
     * The fair candidate source ({@code Fairness}), in place of {@link CandidateSql#PLAIN_SCAN}: the same columns
     * (and the row's key), the same {@code {runs_here}} and {@code {limit_filter}}, the same
     * {@code candidates} for {@link CandidateSql#ONE_PER_KEY}, shared across keys by stride scheduling.
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
     * skip). The statement still defines {@link CandidateSql#PRIORITIES} first: the limited pick reads the head
     * of the queue through it.
     */
    static final String FAIR_WALK = """
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
     * versions this engine does not run ({@code {known_version}}: {@link CandidateSql#KNOWN_VERSION}) is foreign to
     * this engine ({@code fair_foreign}): the statement returns such keys ({@link #FAIR_REPORT}), and
     * the scheduler steps over them in its next picks for a while, so they cost it one bounded look,
     * not one per pick, and cannot fill its walk. Such a key still steps back a slot, as any key with
     * due rows that yielded nothing: with types no engine runs, it must not hold the head of every walk.
     */
    static final String FAIR_MOVES = """
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
     * The capacity of gate row {@code w}'s counter in the fair limited pick: on the queue's cap gate,
     * the cap stored with the row's key (walked by {@link #FAIR_WALK}, so no read; {@code {unknown_cap}}
     * when none is yet), null for the gate's own (a stored 0: the function gave the key none). The counter is upserted with it, so it holds the key's cap from then on.
     */
    static final String FAIR_KEY_CAP = """
            (SELECT CASE WHEN fw.cap IS NULL THEN {unknown_cap}::int ELSE NULLIF(fw.cap, 0) END FROM fair_walk fw
              WHERE w.gate_name = 'fairness.' || $1 AND fw.fairness_key = w.concurrency_key)""";

    /**
     * As the plain pick for a fair queue ({@link PickSql}): {@link #fairSource} (the fair walk and its key moves); $7-$9 the
     * weights, $10 the keys to step over, $11 the cap of a key not asked yet. Returns one row more when it claims nothing (the claimed
     * columns null), as every row carries the foreign keys ({@link #FAIR_REPORT}).
     */
    private final String fairPick;

    /** As {@link PickSql}'s pick with limits for a fair queue: {@link #fairSource} in it; $16-$18 the weights, $19 the keys to step over, $20 the cap of a key not asked yet. */
    private final @Nullable String fairPickWithLimits;

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

    /** The fair picks of an engine that knows limits or ({@code limits} false) none. */
    FairPickSql(Db db, Tables tables, boolean limits) {
        this.db = db;
        this.fairPick = tables.render("WITH RECURSIVE " + fairSource("$6", "$5", NO_LIMITS, 7, "one_per_key")
                + ", claimed AS (\n" + fill(CLAIM, "claimed", "one_per_key") + ClaimColumns.SELECT + "\n)\n"
                + "SELECT claimed.*, " + FAIR_REPORT + " FROM (SELECT) AS one LEFT JOIN claimed ON true");
        this.fairPickWithLimits = limits
                ? AdmissionSql.limited(tables, fairSource("$12", "$11", AdmissionSql.LIMITED_FILTER, 16, "admitted"),
                        fill(FAIR_KEY_CAP, "unknown_cap", "$20"), ", " + FAIR_REPORT) : null;
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
    }

    /** The fair pick's text, of an engine that knows limits (the PostgreSQL limiter admits them in it) or not. */
    String text(boolean limits) {
        return limits ? fairPickWithLimits : fairPick;
    }

    /** The text of the fair pick without limits, for EXPLAIN. */
    String fairPickText() {
        return fairPick;
    }

    /**
     * The fair candidate source, as {@link CandidateSql#plainSource}, with the weights in parameters
     * {@code firstWeight} to {@code firstWeight + 2} (keys, their weights, the default), the keys to
     * step over as foreign in the next ({@code firstWeight + 3}), the cap of a key not asked yet
     * ({@code firstWeight + 4}), and the key
     * moves after the rows of {@code claimed} are claimed: {@link CandidateSql#PRIORITIES}, {@link #FAIR_WALK},
     * {@link CandidateSql#ONE_PER_KEY}, {@link #FAIR_MOVES} (with WITH RECURSIVE, a CTE may name one defined later,
     * here the claimed set).
     */
    static String fairSource(String versions, String types, String limitFilter, int firstWeight,
            String claimed) {
        return PRIORITIES + fill(FAIR_WALK, "runs_here", runsHere(versions, types), "limit_filter", limitFilter,
                        "weighed_keys", "$" + firstWeight, "weights", "$" + (firstWeight + 1),
                        "default_weight", "$" + (firstWeight + 2), "foreign", "$" + (firstWeight + 3),
                        "unknown_cap", "$" + (firstWeight + 4))
                + ONE_PER_KEY + fill(FAIR_MOVES, "claimed", claimed,
                        "known_version", KNOWN_VERSION.formatted(versions, types));
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
}
