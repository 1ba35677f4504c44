package dev.durable.internal.sql;

/**
 * Every statement of the engine, in one place, rendered once for the configured schema. Each is
 * named for what it does and says which index it rides and which locks it takes.
 *
 * <p>All times are the database's {@code now()}; durations travel as milliseconds.
 */
public final class Sql {

    /** Columns of {@link dev.durable.Instance}, in the order the row mapper reads them. */
    static final String INSTANCE_COLUMNS = """
            id, type, type_version, queue, priority, status, step, state::text AS state,
            result::text AS result, last_error, attempt, max_attempts, eligible_at, awaited_signals,
            await_deadline, parent_id, children_pending, concurrency_key, correlation_key, claimed_by,
            lease_expires_at, cancel_requested, inserted_at, updated_at""";

    /**
     * Columns a scheduler needs to run a claimed row, with the row's inbox and children read in
     * the same statement, only for rows flagged as ever having had any (never for plain jobs). The
     * eligible time travels as epoch microseconds: the driver decodes a timestamptz by parsing
     * text, which cost a fifth of the engine's CPU on a busy queue.
     */
    static final String CLAIM_COLUMNS = """
            i.id, i.type, i.type_version, i.queue, i.priority,
            (extract(epoch FROM i.eligible_at) * 1000000)::bigint AS eligible_micros, i.step,
            i.state::text AS state, i.attempt, i.max_attempts, i.concurrency_key, i.parent_id,
            i.awaited_signals, i.gate_name, i.gate_shard, i.rate_limit, i.rate_weight, i.rate_partition,
            CASE WHEN i.has_signals THEN
                (SELECT json_agg(json_build_object('id', s.id, 'name', s.name, 'payload', s.payload::text,
                                                   'at', s.inserted_at) ORDER BY s.id)
                   FROM {signals} s WHERE s.instance_id = i.id AND s.consumed_at IS NULL)::text END AS inbox,
            CASE WHEN i.has_children THEN
                (SELECT json_agg(json_build_object('id', c.id, 'type', c.type, 'status', c.status,
                                                   'result', c.result::text, 'error', c.last_error) ORDER BY c.id)
                   FROM {instances} c WHERE c.parent_id = i.id)::text END AS children""";

    /** Shared by both picks: the queue's runnable, eligible rows in urgency order, locked. */
    private static final String PICK_CANDIDATES = """
            candidates AS (
                SELECT c.id, c.priority, c.eligible_at, c.gate_name, c.concurrency_key, c.gate_shard,
                       c.rate_limit, COALESCE(c.rate_partition, '') AS rate_partition, c.rate_weight,
                       CASE WHEN c.gate_name IS NULL THEN c.concurrency_key END AS ungated_key
                  FROM {instances} c
                 WHERE c.queue = $1 AND c.status = 'runnable' AND c.eligible_at <= now()
                   AND (c.concurrency_key IS NULL OR c.gate_name IS NOT NULL OR NOT EXISTS (
                        SELECT 1 FROM {instances} e
                         WHERE e.concurrency_key = c.concurrency_key AND e.status = 'executing'
                           AND e.gate_name IS NULL))
                   %s
                 ORDER BY c.priority, c.eligible_at, c.id
                 LIMIT $2
                   FOR UPDATE OF c SKIP LOCKED
            ), one_per_key AS (
                SELECT * FROM (
                    SELECT candidates.*, row_number() OVER (
                               PARTITION BY ungated_key, CASE WHEN ungated_key IS NULL THEN id END
                               ORDER BY priority, eligible_at, id) AS key_rank
                      FROM candidates) ranked
                 WHERE key_rank = 1
            )""";

    private static final String PICK_CLAIM = """
            UPDATE {instances} i
               SET status = 'executing', claimed_by = $3, attempt = i.attempt + 1,
                   lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
              FROM %s m
             WHERE i.id = m.id
            RETURNING\s""";

    /** Rows with limits are left to engines that know limits. */
    static final String PICK_WITHOUT_LIMITS = "WITH " + PICK_CANDIDATES.formatted(
            "AND c.gate_name IS NULL AND c.rate_limit IS NULL") + "\n" + PICK_CLAIM.formatted("one_per_key")
            + CLAIM_COLUMNS;

    /**
     * Locks the pick's candidates, limited rows of known names included, without claiming them: the
     * limiter admits them first, then {@link #claimLocked} claims in the same transaction. Rows of a
     * (gate, key, shard) or (rate limit, partition) the limiter refused a moment ago ($5, $6: name,
     * chr(31), key [, chr(31), shard]) are skipped before the LIMIT, so a saturated limit does not
     * fill every pick and crowd out unrelated rows. $3, $4: the gates and rate limits this engine knows.
     */
    static final String PICK_LOCK_CANDIDATES = "WITH " + PICK_CANDIDATES.formatted("""
                   AND (c.gate_name IS NULL OR (c.gate_name = ANY ($3) AND NOT (
                        (c.gate_name || chr(31) || c.concurrency_key || chr(31) || c.gate_shard) = ANY ($5))))
                   AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($4) AND NOT (
                        (c.rate_limit || chr(31) || COALESCE(c.rate_partition, '')) = ANY ($6))))""")
            + """

            SELECT id, priority, (extract(epoch FROM eligible_at) * 1000000)::bigint AS eligible_micros, gate_name,
                   concurrency_key, gate_shard, rate_limit, rate_partition, rate_weight
              FROM one_per_key""";

    static final String PICK_WITH_LIMITS = """
            WITH gates AS (
                SELECT * FROM unnest($5::text[], $6::int[], $7::int[]) AS g(name, capacity, shards)
            ), rates AS (
                SELECT * FROM unnest($8::text[], $9::float8[], $10::int[]) AS r(name, rate, burst)
            ), """ + PICK_CANDIDATES.formatted("""
                   AND (c.gate_name IS NULL OR (c.gate_name = ANY ($5) AND NOT EXISTS (
                        SELECT 1 FROM {gate_slots} s
                         WHERE s.gate = c.gate_name AND s.key = c.concurrency_key AND s.shard = c.gate_shard
                           AND s.held >= s.capacity)))
                   AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($8) AND NOT EXISTS (
                        SELECT 1 FROM {buckets} b JOIN rates r ON r.name = b.name
                         WHERE b.name = c.rate_limit AND b.partition_key = COALESCE(c.rate_partition, '')
                           AND least(r.burst, b.tokens + r.rate * greatest(0, extract(epoch FROM now() - b.refilled_at)))
                               < c.rate_weight)))""") + """
            , rate_wanted AS (
                SELECT o.*, sum(o.rate_weight) OVER (PARTITION BY o.rate_limit, o.rate_partition
                                                     ORDER BY o.priority, o.eligible_at, o.id) AS rate_cum
                  FROM one_per_key o
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
                              AND w.rate_cum <= least(r.burst, b.tokens + r.rate * greatest(0, extract(epoch FROM now() - b.refilled_at)))), 0),
                       tokens = (SELECT least(r.burst, b.tokens + r.rate * greatest(0, extract(epoch FROM now() - b.refilled_at)))
                                   FROM rates r WHERE r.name = b.name)
                                - coalesce((
                           SELECT max(w.rate_cum) FROM rate_wanted w, rates r
                            WHERE w.rate_limit = b.name AND w.rate_partition = b.partition_key AND r.name = b.name
                              AND w.rate_cum <= least(r.burst, b.tokens + r.rate * greatest(0, extract(epoch FROM now() - b.refilled_at)))), 0),
                       refilled_at = greatest(b.refilled_at, now())
                RETURNING b.name, b.partition_key, b.taken
            ), rate_admitted AS (
                SELECT w.* FROM rate_wanted w
                  LEFT JOIN rate_taken t ON t.name = w.rate_limit AND t.partition_key = w.rate_partition
                 WHERE w.rate_limit IS NULL OR w.rate_cum <= t.taken
            ), gate_wanted AS (
                SELECT a.*, row_number() OVER (PARTITION BY a.gate_name, a.concurrency_key, a.gate_shard
                                               ORDER BY a.priority, a.eligible_at, a.id) AS gate_rank
                  FROM rate_admitted a
            ), gate_taken AS (
                INSERT INTO {gate_slots} AS s (gate, key, shard, capacity, held, admitted)
                SELECT w.gate_name, w.concurrency_key, w.gate_shard, cap.capacity,
                       least(count(*), cap.capacity), least(count(*), cap.capacity)
                  FROM gate_wanted w
                  JOIN gates g ON g.name = w.gate_name
                 CROSS JOIN LATERAL (SELECT g.capacity / g.shards
                                            + CASE WHEN w.gate_shard < g.capacity % g.shards THEN 1 ELSE 0 END
                                            AS capacity) cap
                 GROUP BY w.gate_name, w.concurrency_key, w.gate_shard, cap.capacity
                 ORDER BY w.gate_name, w.concurrency_key, w.gate_shard
                ON CONFLICT (gate, key, shard) DO UPDATE
                   SET capacity = EXCLUDED.capacity,
                       admitted = greatest(0, least(EXCLUDED.admitted, EXCLUDED.capacity - s.held)),
                       held = s.held + greatest(0, least(EXCLUDED.admitted, EXCLUDED.capacity - s.held))
                RETURNING s.gate, s.key, s.shard, s.admitted
            ), admitted AS (
                SELECT w.id FROM gate_wanted w
                  LEFT JOIN gate_taken t ON t.gate = w.gate_name AND t.key = w.concurrency_key AND t.shard = w.gate_shard
                 WHERE w.gate_name IS NULL OR w.gate_rank <= t.admitted
            )
            """ + PICK_CLAIM.formatted("admitted") + CLAIM_COLUMNS;

    private final String schema;

    /**
     * Inserts many instances in one round trip from parallel arrays. WITH ORDINALITY and ORDER BY
     * keep identity values, and so the returned rows, in the order of the request. A row's
     * eligible time is its absolute run-at when given, else now() plus its delay. A row with a
     * claimer ($19) is inserted already claimed by that idle local worker, with a lease of $20 ms:
     * claim-on-insert, which saves an idle queue the pick's round trip.
     */
    public final String insertInstances;

    /** One instance by primary key. */
    public final String selectInstance;

    /**
     * A page of instances by optional queue and status, keyset-paginated on id. For dashboards and
     * tests, not a hot path: with its optional filters the plan walks the primary key.
     */
    public final String listInstances;

    /**
     * Cancels an instance, and with $2 its live descendants: at once when runnable or parked, at
     * the next commit when executing (the flag is read by the outcome commit, the release and the
     * reaper). The UPDATE re-reads each row under its lock, so a concurrent pick or commit sees one
     * answer. Returns the root's status before and after (after is null when it had settled).
     */
    public final String cancelInstance;

    /**
     * The pick, in one statement. The candidates are the queue's runnable, eligible rows in
     * urgency order (the pick index), skipping rows locked by another pick and rows whose ungated
     * concurrency key is executing now (probing the executing-key unique index). Of the locked
     * candidates, at most one per ungated key is claimed, the most urgent. Two concurrent picks can
     * still claim the same key from different rows: the unique index refuses the second and the
     * caller retries. Claiming bumps the attempt, so a run that dies counts against max attempts.
     */
    public final String pick;

    /**
     * The pick of an engine that knows gates or rate limits: as {@link #pick}, and the limits are
     * admitted in the same statement. Of the candidates left after the per-key guard, rows of a rate
     * limit are admitted in urgency order while their bucket (refilled by the time since its last
     * admission, capped at its burst) holds their cumulative weight; the bucket row is upserted and
     * locked, and the tokens taken recorded on it. Of those, rows of a gate are admitted while their
     * (gate, key, shard) counter has room, upserted and counted up the same way. Candidates whose
     * bucket or counter is already known to be full are skipped before the LIMIT, so throttled rows
     * never crowd unrelated work out of a pick. Rows of limits this engine does not know are left
     * for an engine that does. $5-$7 are the gates (name, capacity, shards), $8-$10 the rate limits
     * (name, tokens a second, burst). Counters and buckets are upserted in key order, so two picks
     * lock them in the same order and never deadlock; a bucket's clock only moves forward, so a
     * pick whose transaction started before another's admission cannot rewind it and over-refill.
     */
    public final String pickWithLimits;

    /**
     * The first half of the pick of an engine whose limiter is not in the database (Redis): locks
     * the candidates as {@link #pick} does, limited rows of known names included, and returns them
     * unclaimed with their limits. The limiter is asked while the transaction holds the locks (other
     * picks skip the rows), then {@link #claimLocked} claims the admitted and unlimited ones. A
     * refused row is never claimed: its attempt, lease and status are untouched, and the database
     * never shows more executing rows of a gate than the limiter admitted.
     */
    public final String pickLockCandidates;

    /** The second half: claims the locked rows $1 for worker $2 with a lease of $3 ms. */
    public final String claimLocked;

    /** Renews the leases of every row one worker holds, in one statement per tick. */
    public final String heartbeat;

    /**
     * Gives claimed rows that never started back to runnable at once (graceful shutdown), undoing
     * the attempt their claim took.
     */
    public final String release;

    /**
     * Returns expired claims to runnable, or to failed once their attempts are spent, or to
     * cancelled when a cancel was requested. The reaper passes no prefix and a zero margin; the
     * startup reclaim passes its dead predecessors' identity prefix and a margin, so it takes
     * their rows before the lease runs out but never a live owner's freshly beaten one. Bounded
     * per statement; rows under another transaction's lock are left for the next tick.
     */
    public final String recoverExpired;

    /**
     * Commits a batch of outcomes in one statement, each guarded by ownership: the row must still
     * be executing and claimed by the worker that ran it, else the outcome is stale and is not
     * returned. A row whose cancel was requested ends cancelled and keeps its step and state. An
     * outcome that stays executing (inline run-ahead) keeps the claim and renews the lease.
     */
    public final String commitOutcomes;

    /**
     * Locks a commit batch's rows in id order before an await parks or signals are consumed: the
     * commit's next statement then takes a snapshot after any signal delivery that held a row, so a
     * signal that landed while the step ran is seen and wakes the row at once (no lost wakeup),
     * and a later delivery waits for the commit and sees the parked row.
     */
    public final String lockForCommit;

    /**
     * Marks the signals the committed steps consumed, guarded by the same ownership. Marked, not
     * deleted, so their dedup keys keep refusing redeliveries.
     */
    public final String consumeSignals;

    /** Parents that the children settled in a commit woke (the trigger did the counting): to poke. */
    public final String wokenParents;

    /**
     * Stores a signal in a live instance's inbox (a repeated dedup key stores nothing) and wakes the
     * instance when it awaits that name. Locks the target row first, so a commit that parks it
     * either comes before (and the delivery sees it parked) or after (and the commit sees the signal).
     */
    public final String deliverSignalById;

    /** As {@link #deliverSignalById}, addressed by live correlation key (its unique index). */
    public final String deliverSignalByKey;

    /** Resumes parked instances whose await deadline passed, with no awaited signal. */
    public final String expireAwaits;

    /**
     * Deletes up to $2 settled instances older than $1 ms (the GC index), with their signals,
     * sparing children whose parent is still live: its join reads them.
     */
    public final String collectGarbage;

    /**
     * Recounts every gate counter from the executing rows and drops empty counters. Runs after the
     * counters table is locked against picks (see InstanceStore.reconcileGates), so the count is
     * exact; the trigger keeps counters exact anyway, this heals manual edits and restores.
     */
    public final String reconcileGates;

    /** Locks the gate counters for {@link #reconcileGates}: picks wait, readers do not. */
    public final String lockGates;

    /**
     * Instances of the given queues that are due now or running: what awaitIdle waits to see go
     * to zero. Rides the pick index for runnable rows and the lease index for executing ones.
     */
    public final String countBusy;

    /** The database clock: every time Durable reasons about comes from here. */
    public final String now = "SELECT now()";

    public Sql(String schema) {
        this.schema = schema;
        this.countBusy = render("SELECT (SELECT count(*) FROM {instances} WHERE queue = ANY($1)"
                + " AND status = 'runnable' AND eligible_at <= now())"
                + " + (SELECT count(*) FROM {instances} WHERE status = 'executing' AND queue = ANY($1))");
        this.insertInstances = render("""
                INSERT INTO {instances} AS i (type, type_version, queue, priority, step, state, max_attempts,
                                         eligible_at, parent_id, concurrency_key, correlation_key,
                                         correlation_statuses, gate_name, gate_shard, rate_limit, rate_weight,
                                         rate_partition, status, claimed_by, lease_expires_at, attempt)
                SELECT u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb, u.max_attempts,
                       COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond'),
                       u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ','),
                       u.gate, CASE WHEN u.gate IS NOT NULL THEN floor(random() * u.gate_shards)::int END,
                       u.rate_limit, CASE WHEN u.rate_limit IS NOT NULL THEN u.rate_weight END, u.rate_partition,
                       CASE WHEN u.claimer IS NULL THEN 'runnable' ELSE 'executing' END, u.claimer,
                       CASE WHEN u.claimer IS NOT NULL THEN now() + $20 * interval '1 millisecond' END,
                       CASE WHEN u.claimer IS NULL THEN 0 ELSE 1 END
                  FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[],
                              $7::int[], $8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::text[],
                              $13::text[], $14::text[], $15::int[], $16::text[], $17::int[], $18::text[],
                              $19::text[])
                       WITH ORDINALITY
                       AS u(type, type_version, queue, priority, step, state, max_attempts, run_at,
                            delay_ms, parent_id, concurrency_key, correlation_key, occupied, gate, gate_shards,
                            rate_limit, rate_weight, rate_partition, claimer, ord)
                 ORDER BY u.ord
                RETURNING\s""" + CLAIM_COLUMNS);
        this.selectInstance = render("SELECT " + INSTANCE_COLUMNS + " FROM {instances} WHERE id = $1");
        this.listInstances = render("SELECT " + INSTANCE_COLUMNS + "\n" + """
                 FROM {instances}
                 WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR status = $2) AND id > $3
                 ORDER BY id
                 LIMIT $4""");
        this.cancelInstance = render("""
                WITH RECURSIVE tree AS (
                        SELECT id FROM {instances} WHERE id = $1
                    UNION
                        SELECT c.id FROM {instances} c JOIN tree t ON c.parent_id = t.id WHERE $2
                ), changed AS (
                    UPDATE {instances} i
                       SET status = CASE WHEN i.status = 'executing' THEN i.status ELSE 'cancelled' END,
                           cancel_requested = (i.status = 'executing'),
                           await_deadline = NULL,
                           updated_at = now()
                     WHERE i.id IN (SELECT id FROM tree) AND i.status NOT IN ('done', 'failed', 'cancelled')
                    RETURNING i.id, i.status
                )
                SELECT r.status AS before, c.status AS after, r.queue
                  FROM {instances} r LEFT JOIN changed c ON c.id = r.id
                 WHERE r.id = $1""");
        this.pick = render(PICK_WITHOUT_LIMITS);
        this.pickWithLimits = render(PICK_WITH_LIMITS);
        this.pickLockCandidates = render(PICK_LOCK_CANDIDATES);
        this.claimLocked = render("""
                UPDATE {instances} i
                   SET status = 'executing', claimed_by = $2, attempt = i.attempt + 1,
                       lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
                 WHERE i.id = ANY($1) AND i.status = 'runnable'
                RETURNING\s""" + CLAIM_COLUMNS);
        this.heartbeat = render("""
                UPDATE {instances}
                   SET lease_expires_at = now() + $3 * interval '1 millisecond'
                 WHERE id = ANY($1) AND claimed_by = $2 AND status = 'executing'""");
        this.release = render("""
                UPDATE {instances}
                   SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'runnable' END,
                       claimed_by = NULL, lease_expires_at = NULL,
                       attempt = greatest(attempt - 1, 0), updated_at = now()
                 WHERE id = ANY($1) AND claimed_by = $2 AND status = 'executing'
                RETURNING id, queue""");
        this.recoverExpired = render("""
                WITH expired AS (
                    SELECT id FROM {instances}
                     WHERE status = 'executing'
                       AND lease_expires_at < now() + $1 * interval '1 millisecond'
                       AND ($2::text IS NULL OR (left(claimed_by, length($2)) = $2 AND claimed_by <> $3))
                     ORDER BY lease_expires_at
                     LIMIT $4
                       FOR UPDATE SKIP LOCKED
                )
                UPDATE {instances} i
                   SET status = CASE WHEN i.cancel_requested THEN 'cancelled'
                                     WHEN i.attempt >= i.max_attempts THEN 'failed'
                                     ELSE 'runnable' END,
                       last_error = CASE WHEN i.cancel_requested THEN i.last_error
                                         ELSE 'lease of ' || i.claimed_by || ' expired on attempt ' || i.attempt
                                              || ' of ' || i.max_attempts END,
                       claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
                  FROM expired x
                 WHERE i.id = x.id
                RETURNING i.id, i.queue, i.status""");
        this.commitOutcomes = render("""
                UPDATE {instances} i
                   SET status = CASE WHEN i.cancel_requested THEN 'cancelled'
                                     WHEN o.status = 'awaiting_signal' AND EXISTS (
                                          SELECT 1 FROM {signals} s
                                           WHERE s.instance_id = i.id AND s.consumed_at IS NULL
                                             AND s.name = ANY (string_to_array(o.awaited, ',')))
                                     THEN 'runnable'
                                     ELSE o.status END,
                       step = CASE WHEN i.cancel_requested THEN i.step ELSE COALESCE(o.step, i.step) END,
                       state = CASE WHEN i.cancel_requested OR o.state IS NULL THEN i.state
                                    ELSE o.state::jsonb END,
                       result = CASE WHEN i.cancel_requested THEN i.result ELSE o.result::jsonb END,
                       last_error = COALESCE(o.error, i.last_error),
                       attempt = CASE WHEN i.cancel_requested OR o.attempt IS NULL THEN i.attempt
                                      ELSE o.attempt END,
                       eligible_at = CASE WHEN o.delay_ms IS NULL OR i.cancel_requested THEN i.eligible_at
                                          ELSE now() + o.delay_ms * interval '1 millisecond' END,
                       awaited_signals = CASE WHEN i.cancel_requested THEN i.awaited_signals
                                              ELSE string_to_array(o.awaited, ',') END,
                       await_deadline = CASE WHEN o.await_ms IS NULL OR i.cancel_requested THEN NULL
                                             ELSE now() + o.await_ms * interval '1 millisecond' END,
                       children_pending = CASE WHEN o.status = 'awaiting_children' AND NOT i.cancel_requested
                                               THEN o.children ELSE i.children_pending END,
                       has_children = i.has_children OR (o.status = 'awaiting_children' AND NOT i.cancel_requested),
                       concurrency_key = CASE WHEN i.cancel_requested OR o.key_change = 0 THEN i.concurrency_key
                                              WHEN o.key_change IN (1, 3) THEN o.new_key END,
                       gate_name = CASE WHEN i.cancel_requested OR o.key_change = 0 THEN i.gate_name
                                        WHEN o.key_change = 3 THEN o.new_gate END,
                       gate_shard = CASE WHEN i.cancel_requested OR o.key_change = 0 THEN i.gate_shard
                                         WHEN o.key_change = 3 THEN floor(random() * o.gate_shards)::int END,
                       rate_limit = CASE WHEN i.cancel_requested OR o.rate_change = 0 THEN i.rate_limit
                                         WHEN o.rate_change = 1 THEN o.rate_limit END,
                       rate_weight = CASE WHEN i.cancel_requested OR o.rate_change = 0 THEN i.rate_weight
                                          WHEN o.rate_change = 1 THEN o.rate_weight END,
                       rate_partition = CASE WHEN i.cancel_requested OR o.rate_change = 0 THEN i.rate_partition
                                             WHEN o.rate_change = 1 THEN o.rate_partition END,
                       claimed_by = CASE WHEN o.status = 'executing' AND NOT i.cancel_requested
                                         THEN i.claimed_by END,
                       lease_expires_at = CASE WHEN o.status = 'executing' AND NOT i.cancel_requested
                                               THEN now() + o.lease_ms * interval '1 millisecond' END,
                       updated_at = now()
                  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                              $7::text[], $8::bigint[], $9::int[], $10::bigint[], $11::text[], $12::bigint[],
                              $13::int[], $14::int[], $15::text[], $16::text[], $17::int[], $18::int[],
                              $19::text[], $20::int[], $21::text[], $22::int[])
                       AS o(id, worker, status, step, state, result, error, delay_ms, attempt, lease_ms,
                            awaited, await_ms, children, key_change, new_key, new_gate, gate_shards,
                            rate_change, rate_limit, rate_weight, rate_partition, claimed_attempt)
                 WHERE i.id = o.id AND i.claimed_by = o.worker AND i.status = 'executing'
                   AND i.attempt = o.claimed_attempt
                RETURNING i.id, i.status, i.queue""");
        this.lockForCommit = render("""
                SELECT id FROM {instances} WHERE id = ANY($1) ORDER BY id FOR UPDATE""");
        this.consumeSignals = render("""
                UPDATE {signals} s SET consumed_at = now()
                  FROM unnest($1::bigint[], $2::text[]) AS c(signal_id, worker), {instances} i
                 WHERE s.id = c.signal_id AND i.id = s.instance_id
                   AND i.claimed_by = c.worker AND i.status = 'executing'""");
        this.wokenParents = render("""
                SELECT id, queue, status FROM {instances}
                 WHERE id = ANY($1) AND status = 'runnable' AND children_pending <= 0""");
        String deliver = """
                WITH target AS (
                    SELECT id, queue, status, awaited_signals FROM {instances}
                     WHERE %s AND status NOT IN ('done', 'failed', 'cancelled')
                       FOR UPDATE
                ), stored AS (
                    INSERT INTO {signals} (instance_id, name, payload, dedup_key)
                    SELECT id, $2, $3::jsonb, $4 FROM target
                    ON CONFLICT (instance_id, dedup_key) DO NOTHING
                    RETURNING instance_id
                ), flagged AS (
                    UPDATE {instances} i
                       SET has_signals = true,
                           status = CASE WHEN t.status = 'awaiting_signal' AND $2 = ANY (t.awaited_signals)
                                         THEN 'runnable' ELSE i.status END,
                           eligible_at = CASE WHEN t.status = 'awaiting_signal' AND $2 = ANY (t.awaited_signals)
                                              THEN now() ELSE i.eligible_at END,
                           await_deadline = CASE WHEN t.status = 'awaiting_signal' AND $2 = ANY (t.awaited_signals)
                                                 THEN NULL ELSE i.await_deadline END,
                           updated_at = now()
                      FROM target t
                     WHERE i.id = t.id AND EXISTS (SELECT 1 FROM stored)
                    RETURNING i.id, i.status
                )
                SELECT t.id, t.queue, (SELECT count(*) FROM stored) AS stored,
                       (SELECT count(*) FROM flagged f WHERE f.status = 'runnable' AND t.status = 'awaiting_signal')
                       AS woken
                  FROM target t""";
        this.deliverSignalById = render(deliver.formatted("id = $1"));
        this.deliverSignalByKey = render(deliver.formatted("correlation_slot = $1"));
        this.collectGarbage = render("""
                WITH doomed AS (
                    SELECT i.id FROM {instances} i
                     WHERE i.status IN ('done', 'failed', 'cancelled')
                       AND i.updated_at < now() - $1 * interval '1 millisecond'
                       AND (i.parent_id IS NULL OR NOT EXISTS (
                            SELECT 1 FROM {instances} p
                             WHERE p.id = i.parent_id AND p.status NOT IN ('done', 'failed', 'cancelled')))
                     ORDER BY i.updated_at
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED
                ), signals AS (
                    DELETE FROM {signals} s USING doomed d WHERE s.instance_id = d.id
                )
                DELETE FROM {instances} i USING doomed d WHERE i.id = d.id""");
        this.lockGates = render("LOCK TABLE {gate_slots} IN EXCLUSIVE MODE");
        this.reconcileGates = render("""
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
        this.expireAwaits = render("""
                WITH due AS (
                    SELECT id FROM {instances}
                     WHERE status = 'awaiting_signal' AND await_deadline < now()
                     ORDER BY await_deadline
                     LIMIT $1
                       FOR UPDATE SKIP LOCKED
                )
                UPDATE {instances} i
                   SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
                  FROM due d
                 WHERE i.id = d.id
                RETURNING i.id, i.queue, i.status""");
    }

    public String schema() {
        return schema;
    }

    /** The schema-qualified name of one of Durable's tables. */
    public String table(String name) {
        return '"' + schema + "\"." + name;
    }

    private String render(String template) {
        return template
                .replace("{instances}", table("durable_instances"))
                .replace("{signals}", table("durable_signals"))
                .replace("{gate_slots}", table("durable_gate_slots"))
                .replace("{buckets}", table("durable_rate_buckets"));
    }
}
