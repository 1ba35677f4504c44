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
     * the same statement (each a probe of an index that is empty for plain jobs).
     */
    static final String CLAIM_COLUMNS = """
            i.id, i.type, i.type_version, i.queue, i.priority, i.eligible_at, i.step,
            i.state::text AS state, i.attempt, i.max_attempts, i.concurrency_key, i.parent_id,
            i.awaited_signals,
            (SELECT json_agg(json_build_object('id', s.id, 'name', s.name, 'payload', s.payload::text,
                                               'at', s.inserted_at) ORDER BY s.id)
               FROM {signals} s WHERE s.instance_id = i.id AND s.consumed_at IS NULL)::text AS inbox,
            (SELECT json_agg(json_build_object('id', c.id, 'type', c.type, 'status', c.status,
                                               'result', c.result::text, 'error', c.last_error) ORDER BY c.id)
               FROM {instances} c WHERE c.parent_id = i.id)::text AS children""";

    private final String schema;

    /**
     * Inserts many instances in one round trip from parallel arrays. WITH ORDINALITY and ORDER BY
     * keep identity values, and so the returned ids, in the order of the request. A row's
     * eligible time is its absolute run-at when given, else now() plus its delay.
     */
    public final String insertInstances;

    /** One instance by primary key. */
    public final String selectInstance;

    /**
     * A page of instances by optional queue and status, keyset-paginated on id (rides the
     * queue/status index when both are given).
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

    /** The database clock: every time Durable reasons about comes from here. */
    public final String now = "SELECT now()";

    public Sql(String schema) {
        this.schema = schema;
        this.insertInstances = render("""
                INSERT INTO {instances} (type, type_version, queue, priority, step, state, max_attempts,
                                         eligible_at, parent_id, concurrency_key, correlation_key,
                                         correlation_statuses)
                SELECT u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb, u.max_attempts,
                       COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond'),
                       u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ',')
                  FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[],
                              $7::int[], $8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::text[],
                              $13::text[])
                       WITH ORDINALITY
                       AS u(type, type_version, queue, priority, step, state, max_attempts, run_at,
                            delay_ms, parent_id, concurrency_key, correlation_key, occupied, ord)
                 ORDER BY u.ord
                RETURNING id""");
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
        this.pick = render("""
                WITH candidates AS (
                    SELECT c.id, c.priority, c.eligible_at,
                           CASE WHEN c.gate_name IS NULL THEN c.concurrency_key END AS ungated_key
                      FROM {instances} c
                     WHERE c.queue = $1 AND c.status = 'runnable' AND c.eligible_at <= now()
                       AND (c.concurrency_key IS NULL OR c.gate_name IS NOT NULL OR NOT EXISTS (
                            SELECT 1 FROM {instances} e
                             WHERE e.concurrency_key = c.concurrency_key AND e.status = 'executing'
                               AND e.gate_name IS NULL))
                     ORDER BY c.priority, c.eligible_at, c.id
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED
                ), most_urgent_per_key AS (
                    SELECT id FROM (
                        SELECT id, row_number() OVER (
                                   PARTITION BY ungated_key, CASE WHEN ungated_key IS NULL THEN id END
                                   ORDER BY priority, eligible_at, id) AS rank
                          FROM candidates) ranked
                     WHERE rank = 1
                )
                UPDATE {instances} i
                   SET status = 'executing', claimed_by = $3, attempt = i.attempt + 1,
                       lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
                  FROM most_urgent_per_key m
                 WHERE i.id = m.id
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
                       concurrency_key = CASE WHEN i.cancel_requested OR o.key_change = 0 THEN i.concurrency_key
                                              WHEN o.key_change = 1 THEN o.new_key END,
                       claimed_by = CASE WHEN o.status = 'executing' AND NOT i.cancel_requested
                                         THEN i.claimed_by END,
                       lease_expires_at = CASE WHEN o.status = 'executing' AND NOT i.cancel_requested
                                               THEN now() + o.lease_ms * interval '1 millisecond' END,
                       updated_at = now()
                  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                              $7::text[], $8::bigint[], $9::int[], $10::bigint[], $11::text[], $12::bigint[],
                              $13::int[], $14::int[], $15::text[])
                       AS o(id, worker, status, step, state, result, error, delay_ms, attempt, lease_ms,
                            awaited, await_ms, children, key_change, new_key)
                 WHERE i.id = o.id AND i.claimed_by = o.worker AND i.status = 'executing'
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
                ), woken AS (
                    UPDATE {instances} i
                       SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
                      FROM target t
                     WHERE i.id = t.id AND t.status = 'awaiting_signal' AND $2 = ANY (t.awaited_signals)
                       AND EXISTS (SELECT 1 FROM stored)
                    RETURNING i.id
                )
                SELECT t.id, t.queue, (SELECT count(*) FROM stored) AS stored,
                       (SELECT count(*) FROM woken) AS woken
                  FROM target t""";
        this.deliverSignalById = render(deliver.formatted("id = $1"));
        this.deliverSignalByKey = render(deliver.formatted("correlation_slot = $1"));
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
                .replace("{gates}", table("durable_gates"))
                .replace("{buckets}", table("durable_rate_buckets"));
    }
}
