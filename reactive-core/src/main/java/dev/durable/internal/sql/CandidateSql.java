package dev.durable.internal.sql;

/**
 * What every pick starts from: a queue's candidates, the guard that claims at most one row per
 * ungated key, and the claim, as fragments the picks compose ({@link PickSql}, {@link FairPickSql},
 * {@link LockedPickSql}).
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
 * <p>Of an ungated key's runnable rows only its head is a candidate (the schema's "Key election"): the others carry
 * {@code key_waiting}, which the pick indexes leave out, so every scan here reads {@code NOT
 * key_waiting} beside {@code status = 'runnable'} (or the partial index cannot serve it) and a busy
 * key's backlog costs the pick nothing (benchmarks/README.md, "Pick cost by backlog shape"). The
 * executing-key probe and the try-lock stay as the guard that needs no invariant: a key's head is
 * runnable only while none of its rows executes, so the probe reads one index entry per keyed head.
 */
final class CandidateSql {

    private CandidateSql() {
    }

    /** What every candidate scan reads of a row (alias {@code c}): one list, so the picks agree on their columns. */
    static final String CANDIDATE_COLUMNS = """
                SELECT c.id, c.type, c.priority, c.eligible_at, c.gate_name, c.concurrency_key, c.gate_shard,
                       c.rate_limit, COALESCE(c.rate_partition, '') AS rate_partition, c.rate_weight,
                       c.window_name, COALESCE(c.window_partition, '') AS window_partition, c.window_weight,
                       CASE WHEN c.gate_name IS NULL THEN c.concurrency_key END AS ungated_key
            """;

    /**
     * A row of a type, at a version, this engine runs (%1$s the versions, %2$s the types: current
     * versions, then lowest ones). Alone, for a probe that claims nothing and so takes no key guard.
     */
    static final String KNOWN_VERSION = """
            c.type_version <= (%1$s::int[])[array_position(%2$s::text[], c.type)]
            AND c.type_version >= COALESCE((%1$s::int[])[array_position(%2$s::text[], c.type) + cardinality(%2$s::text[])], 1)""";

    /**
     * The per-row conditions every candidate scan shares (plain, limited, fair): {@link #KNOWN_VERSION},
     * and an ungated concurrency key is neither executing now nor being claimed by another pick (the
     * executing-key probe, then a tried advisory lock on the key's hash). The probe spells out the
     * executing-key index's whole predicate, so that a plan that hashes the executing keys once reads
     * that index, not the table. One place, so a guard added here reaches every pick.
     */
    static final String RUNS_HERE = "AND " + KNOWN_VERSION + """

                   AND (c.concurrency_key IS NULL OR c.gate_name IS NOT NULL OR CASE
                        WHEN EXISTS (SELECT 1 FROM {instances} e
                                      WHERE e.concurrency_key = c.concurrency_key AND e.status = 'executing'
                                        AND e.concurrency_key IS NOT NULL AND e.gate_name IS NULL) THEN false
                        ELSE pg_try_advisory_xact_lock(hashtextextended(c.concurrency_key, 0)) END)
            """;

    /**
     * The queue's distinct runnable priorities in ascending order, one index-only descent each
     * ({@code min(priority) > previous}): the skip over future rows the class describes (the statement
     * starts WITH RECURSIVE for it). Every pick defines it first; the plain scan reads through it, and
     * so does the limited pick's count of the head of the queue.
     */
    static final String PRIORITIES = """
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
    static final String PLAIN_SCAN = """
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

    /** The limit filter of a statement that takes no limited rows (an engine that knows no limits). */
    static final String NO_LIMITS = "AND c.gate_name IS NULL AND c.rate_limit IS NULL AND c.window_name IS NULL";

    /**
     * The one-per-key guard every source ends with: of the locked {@code candidates}, at most one
     * per ungated key, the most urgent.
     */
    static final String ONE_PER_KEY = """
            , one_per_key AS (
                SELECT * FROM (
                    SELECT candidates.*, row_number() OVER (
                               PARTITION BY ungated_key, CASE WHEN ungated_key IS NULL THEN id END
                               ORDER BY priority, eligible_at, id) AS key_rank
                      FROM candidates) ranked
                 WHERE key_rank = 1
            )""";

    /**
     * Claims the rows of the CTE named by {@code {claimed}} for worker $3 with a lease of $4 ms. The ids
     * come as one array ({@code = ANY}, as the commit statements take theirs), not as a join: a join's
     * plan follows the statistics, and a generic plan made while the hot table was empty joined the
     * claimed rows to a sequential scan of it, re-reading them once per row of the table (10 s for a
     * pick of 256 over 20,000 rows). An array is one index probe per id, or at worst one scan. The
     * claim records its transaction ({@link ClaimStamp}).
     */
    static final String CLAIM = """
            UPDATE {instances} i
               SET status = 'executing', claimed_by = $3, attempt = i.attempt + 1,
                   lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now(), %s
             WHERE i.id = ANY (ARRAY(SELECT m.id FROM {claimed} m))
            RETURNING\s""".formatted(ClaimStamp.SET);

    /**
     * The plain candidate source of a statement whose known versions and types are the parameters
     * named {@code versions} and {@code types}, taking the limited rows {@code limitFilter} lets
     * through: {@link #PRIORITIES}, {@link #PLAIN_SCAN}, {@link #ONE_PER_KEY}.
     */
    static String plainSource(String versions, String types, String limitFilter) {
        return PRIORITIES + fill(PLAIN_SCAN, "runs_here", runsHere(versions, types), "limit_filter", limitFilter)
                + ONE_PER_KEY;
    }

    /** {@link #RUNS_HERE} for the parameters named {@code versions} and {@code types}. */
    static String runsHere(String versions, String types) {
        return RUNS_HERE.formatted(versions, types).strip();
    }

    /**
     * Fills a fragment's named placeholders ({@code {name}}, each given as a name and its text), every
     * occurrence; a name the fragment does not hold is a mistake in the picks' fragments, so it fails when the
     * engine builds its statements, never on a pick.
     */
    static String fill(String fragment, String... namesAndTexts) {
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
}
