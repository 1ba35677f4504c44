package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The statements of the outcome commit. A batch of plain outcomes is the one {@link #commit}
 * statement; a batch with riders runs them all in one transaction, in this order: lock the rows,
 * mark consumed signals, commit, insert children (through {@link InstanceSql}), find woken parents.
 * The orchestration lives in the engine ({@code OutcomeCommit}); these only run statements.
 */
public final class OutcomeSql {

    private static Columns.Builder<OutcomeRow> columns() {
        return Columns.<OutcomeRow>builder()
            .bigint("id", OutcomeRow::id)
            .text("worker", OutcomeRow::worker)
            .text("status", o -> o.status().sqlName())
            .text("step", OutcomeRow::step)
            .text("state", OutcomeRow::stateJson)
            .text("result", OutcomeRow::resultJson)
            .text("error", OutcomeRow::error)
            .bigint("delay_ms", OutcomeRow::delayMillis)
            .integer("attempt", OutcomeRow::attempt)
            .bigint("lease_ms", OutcomeRow::leaseMillis)
            .text("awaited", OutcomeRow::awaitedSignals)
            .bigint("await_ms", OutcomeRow::awaitMillis)
            .integer("children", o -> o.children().size())
            .integer("key_change", o -> o.limitChange().keyChange().ordinal())
            .text("new_key", o -> o.limitChange().concurrencyKey())
            .text("new_gate", o -> o.limitChange().gate())
            .integer("gate_shards", o -> o.limitChange().gateShards())
            .integer("rate_change", o -> o.limitChange().rateChange().ordinal())
            .rateSlot(o -> o.limitChange().rate())
            .integer("window_change", o -> o.limitChange().windowChange().ordinal())
            .windowSlot(o -> o.limitChange().window())
            .integer("fairness_change", o -> o.limitChange().fairnessChange().ordinal())
            .text("fairness_key", o -> o.limitChange().fairnessKey())
            .integer("claimed_attempt", OutcomeRow::claimedAttempt)
            .bigint("claim_xid", OutcomeRow::claimXid);
    }

    /** The plain settling outcomes' columns: the fast path ships seven arrays, not the full outcome's twenty-nine. */
    private static Columns.Builder<OutcomeRow> settleColumns() {
        return Columns.<OutcomeRow>builder()
            .bigint("id", OutcomeRow::id)
            .text("worker", OutcomeRow::worker)
            .integer("claimed_attempt", OutcomeRow::claimedAttempt)
            .bigint("claim_xid", OutcomeRow::claimXid)
            .text("status", o -> o.status().sqlName())
            .text("result", OutcomeRow::resultJson)
            .text("error", OutcomeRow::error);
    }

    /**
     * With tracing, each outcome also ships its run's span context ({@code trace}) as the row's
     * trace_last; without, the statements have no such array and leave the column alone.
     */
    private final Columns<OutcomeRow> columns;
    private final Columns<OutcomeRow> settleColumns;

    /**
     * The ownership guard of every commit: the claim's worker, attempt and stamp ({@link ClaimStamp}),
     * looked up by primary key. The commits read each row's outcome by position ({@link Columns#atPosition}: {@code o.x} is
     * the x array's element at the row's place among the sorted ids), not by joining the rows to the
     * unnested outcomes: that join's plan was the statistics' to pick (a merge join, a hash join over
     * a scan of the whole table, or, after an ANALYZE mid-burst, a nested loop re-reading every
     * outcome for every row: 60-70 µs of server time per job in the shootout; HotPlansIT). So
     * {@code id = ANY ($1)} finds the rows by primary key, and {@code i.id = o.id} checks the place.
     */
    private static final String GUARD = "i.id = o.id AND i.id = ANY ($1::bigint[]) AND i.claimed_by = o.worker"
            + " AND i.attempt = o.claimed_attempt AND " + ClaimStamp.matches("i", "o.claim_xid");

    /**
     * An inline step (the outcome stays executing) on a claim whose lease ran out: it cannot keep a
     * claim that lapsed, so it goes on through the queue.
     */
    private static final String INLINE_ON_LAPSED = "o.status = 'executing' AND i.lease_expires_at <= now()";
    /** An inline step keeps its claim and renews the lease: not cancelled, lease still live. */
    private static final String KEEPS_CLAIM = "o.status = 'executing' AND NOT i.cancel_requested"
            + " AND i.lease_expires_at > now()";
    /**
     * A general outcome's final status: a requested cancel wins; an inline step whose claim's lease
     * lapsed goes on through the queue; an await whose signal already came goes straight back to
     * runnable (the lost-wakeup check, through the inbox index).
     */
    private static final String FINAL = """
            CASE WHEN i.cancel_requested THEN 'cancelled'
                 WHEN %s THEN 'runnable'
                 WHEN o.status = 'awaiting_signal' AND EXISTS (
                      SELECT 1 FROM {signals} s
                       WHERE s.instance_id = i.id AND s.consumed_at IS NULL
                         AND s.name = ANY (string_to_array(o.awaited, ',')))
                 THEN 'runnable'
                 ELSE o.status END""".formatted(INLINE_ON_LAPSED);
    private static final String STEP = "CASE WHEN i.cancel_requested THEN i.step ELSE COALESCE(o.step, i.step) END";
    private static final String STATE = "CASE WHEN i.cancel_requested OR o.state IS NULL THEN i.state ELSE o.state::jsonb END";
    private static final String RESULT = "CASE WHEN i.cancel_requested THEN i.result ELSE o.result::jsonb END";
    private static final String ERROR = "COALESCE(o.error, i.last_error)";
    /** A step that goes on through the queue instead of inline (its lease lapsed) starts afresh, as a queued next. */
    private static final String ATTEMPT = "CASE WHEN i.cancel_requested OR o.attempt IS NULL THEN i.attempt"
            + " WHEN " + INLINE_ON_LAPSED + " THEN 0 ELSE o.attempt END";
    /** A settling outcome's final status on the fast path. */
    private static final String SETTLE_FINAL = "CASE WHEN i.cancel_requested THEN 'cancelled' ELSE o.status END";

    /**
     * Commits a batch of outcomes in one statement, each guarded by ownership: the row must still
     * be claimed by the worker that ran it, at the attempt and by the transaction its claim took
     * ({@link #GUARD}; the table's check ties a claim to the executing status, so no status filter
     * is needed: the row is found by primary key, whatever the statistics say about executing
     * rows); else the outcome is stale and is not returned. A row whose cancel was requested ends cancelled and keeps its step and state. An
     * outcome that stays executing (inline run-ahead) keeps the claim and renews the lease, unless
     * the lease has run out: a lapsed lease is never renewed (a lease-native limiter may have given
     * its gate slot away), so the step goes on through the queue, runnable. An
     * await whose signal is already in the inbox goes straight back to runnable (the lost-wakeup
     * check). An outcome that runs the same step again (a retry, an error retried with backoff,
     * work handed back) keeps what woke the step: its awaited signals stay awaited and unconsumed,
     * and a join keeps its children, so the redo sees what the first try saw. {@code has_children}
     * marks a claim that joins: set when a step parks for children, cleared by the first outcome
     * that moves to another step. Key and rate changes are coded as the ordinals of
     * {@code Outcome.KeyChange} (keep, set, release, gate) and {@code Outcome.RateChange}; a fairness
     * change ships the key the row moves to (the fair activation trigger sees it as the row turns
     * runnable, so the next step is claimed under it). Rows
     * that settle move to the history table ({@link Settled}); the others are updated in place.
     * Index: the primary key per outcome; the inbox index for the await check; the history's
     * primary key for settled rows. Locks: each committed row, in the order given (callers sort
     * by id, so two commits lock in one order; a heartbeat skips rows a commit holds), and, through
     * the triggers, its parent's
     * row and its gate counter.
     */
    private final String commit;

    /**
     * The fast path of the commit, for outcomes that only settle a row (done, failed, cancelled)
     * with no rider: seven arrays instead of twenty-nine, the same guard, the same move to the history
     * table, and an in-place update for a row whose correlation key stays occupied. Index: the
     * primary key per outcome; the history's primary key. Locks: each settled row, in the order
     * given, and through the triggers its gate counter.
     */
    private final String settle;

    /**
     * Locks a commit batch's rows in id order before an await parks or signals are consumed: the
     * commit then takes its snapshot after any signal delivery that held a row, so a signal that
     * landed while the step ran is seen and wakes the row at once (no lost wakeup), and a later
     * delivery waits for the commit and sees the parked row. Index: primary key. Locks: the batch's
     * rows, in id order, to the end of the transaction.
     */
    private final String lockForCommit;

    /**
     * Marks the signals the committed steps consumed, guarded by the same ownership as the commit
     * (worker, claimed attempt and claiming transaction), so a stale run of an earlier claim cannot
     * consume the signals a newer run awaits. Marked, not deleted, so their dedup keys keep refusing
     * redeliveries.
     * Index: the signals' primary key and the instances' primary key. Locks: the marked signal rows.
     */
    private final String consumeSignals;

    /**
     * Parents that the children settled in a commit woke (the trigger did the counting): to poke.
     * Index: primary key. Locks: none.
     */
    private final String wokenParents;

    /**
     * Opens the transaction of a transactional run. The server bounds how long it may sit idle (a run
     * whose engine froze or lost its network, the server seeing no close, has its transaction ended
     * and the locks its handler's writes took released, instead of holding them until TCP gives up),
     * and each of the handler's statements by the type's timeout (not the engine's own statement
     * timeout, which is for the engine's statements). One round trip (simple protocol: the bounds are
     * numbers of milliseconds, formatted here). Index: none. Locks: none.
     */
    private static final String BEGIN_BOUNDED = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = %d;"
            + " SET LOCAL statement_timeout = %d";

    /**
     * Before a transactional run's outcome, once its handler's statements are done: the engine's bound
     * on a statement again, and generic plans. The outcome's statement alone on its connection got a
     * custom plan on every call (the planner prefers one for an array it knows has one element), and
     * planning it cost more server time than running it (the shootout's durable_tx: 615 against 363 us
     * of PostgreSQL CPU a job); its generic plan finds the row by primary key like the custom one
     * ({@link #GUARD}, HotPlansIT). Local to the transaction, set after the handler so its statements
     * plan as they would anywhere. One round trip. Index: none. Locks: none.
     */
    private static final String BEFORE_OUTCOME = "SET LOCAL plan_cache_mode = force_generic_plan;"
            + " SET LOCAL statement_timeout = %d";

    /**
     * A caller's completion first locks the claimed row, checking the claim with its step (the
     * commit's guard knows a claim by worker, attempt and transaction, which an inline step that
     * followed on the same claim shares: a claim used after its run went on would settle the next
     * step), and reads whether its cancel was requested (the settle would then end it cancelled). Held locked, the row
     * cannot change before the settle that follows. Index: primary key. Locks: the row, to the end of
     * the caller's transaction.
     */
    private final String lockClaim;

    public OutcomeSql(Tables tables) {
        this(tables, false);
    }

    /** With {@code traced}, the commits store each run's span context ({@code EngineOptions.tracePropagation}). */
    public OutcomeSql(Tables tables, boolean traced) {
        this.columns = traced ? columns().text("trace", OutcomeRow::traceLast).build() : columns().build();
        this.settleColumns = traced ? settleColumns().text("trace", OutcomeRow::traceLast).build()
                : settleColumns().build();
        String traceLast = traced ? "COALESCE(o.trace, i.trace_last)" : "i.trace_last";
        String traceSet = traced ? "trace_last = " + traceLast + ", " : "";
        this.commit = tables.render(columns.atPosition("WITH "
                + Settled.move(null, GUARD, FINAL, STEP, STATE, RESULT, ERROR, ATTEMPT, traceLast) + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = %s,
                           step = %s,
                           state = %s,
                           result = %s,
                           last_error = %s,
                           attempt = %s,
                           eligible_at = CASE WHEN o.delay_ms IS NULL OR i.cancel_requested THEN i.eligible_at
                                              ELSE now() + o.delay_ms * interval '1 millisecond' END,
                           awaited_signals = CASE WHEN i.cancel_requested OR (o.step IS NULL AND o.status = 'runnable')
                                                  THEN i.awaited_signals
                                                  ELSE string_to_array(o.awaited, ',') END,
                           await_deadline = CASE WHEN o.await_ms IS NULL OR i.cancel_requested THEN NULL
                                                 ELSE now() + o.await_ms * interval '1 millisecond' END,
                           children_pending = CASE WHEN o.status = 'awaiting_children' AND NOT i.cancel_requested
                                                   THEN o.children ELSE i.children_pending END,
                           has_children = CASE WHEN o.status = 'awaiting_children' AND NOT i.cancel_requested THEN true
                                               WHEN o.step IS NOT NULL THEN false
                                               ELSE i.has_children END,
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
                           window_name = CASE WHEN i.cancel_requested OR o.window_change = 0 THEN i.window_name
                                              WHEN o.window_change = 1 THEN o.window_name END,
                           window_weight = CASE WHEN i.cancel_requested OR o.window_change = 0 THEN i.window_weight
                                                WHEN o.window_change = 1 THEN o.window_weight END,
                           window_partition = CASE WHEN i.cancel_requested OR o.window_change = 0 THEN i.window_partition
                                                   WHEN o.window_change = 1 THEN o.window_partition END,
                           fairness_key = CASE WHEN i.cancel_requested OR o.fairness_change = 0 THEN i.fairness_key
                                               ELSE o.fairness_key END,
                           claimed_by = CASE WHEN {keeps_claim} THEN i.claimed_by END,
                           lease_expires_at = CASE WHEN {keeps_claim}
                                                   THEN now() + o.lease_ms * interval '1 millisecond' END,
                           {trace_set}updated_at = now()
                     WHERE %s AND NOT (%s)
                    RETURNING i.id, i.queue, i.status
                )
                SELECT id, queue, status FROM moved
                 UNION ALL
                SELECT id, queue, status FROM kept""".formatted(FINAL, STEP, STATE, RESULT, ERROR, ATTEMPT, GUARD,
                Settled.settlesWhere(FINAL)).replace("{keeps_claim}", KEEPS_CLAIM).replace("{trace_set}", traceSet),
                "o", "i.id", 1));
        this.settle = tables.render(settleColumns.atPosition("WITH "
                + Settled.move(null, GUARD, SETTLE_FINAL, "i.step", "i.state", RESULT, ERROR, "i.attempt", traceLast)
                + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = %s, result = %s, last_error = %s, awaited_signals = NULL, await_deadline = NULL,
                           claimed_by = NULL, lease_expires_at = NULL, {trace_set}updated_at = now()
                     WHERE %s AND NOT (%s)
                    RETURNING i.id, i.queue, i.status
                )
                SELECT id, queue, status FROM moved
                 UNION ALL
                SELECT id, queue, status FROM kept""".formatted(SETTLE_FINAL, RESULT, ERROR, GUARD,
                Settled.settlesWhere(SETTLE_FINAL)).replace("{trace_set}", traceSet), "o", "i.id", 1));
        this.lockForCommit = tables.render("SELECT id FROM {instances} WHERE id = ANY($1) ORDER BY id FOR UPDATE");
        this.lockClaim = tables.render("""
                SELECT i.cancel_requested FROM {instances} i
                 WHERE i.id = $1 AND i.claimed_by = $2 AND i.attempt = $3 AND i.step = $4 AND i.status = 'executing'
                   AND %s
                   FOR UPDATE""".formatted(ClaimStamp.matches("i", "$5")));
        this.consumeSignals = tables.render("""
                UPDATE {signals} s SET consumed_at = now()
                  FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bigint[])
                       AS c(signal_id, worker, attempt, claim_xid), {instances} i
                 WHERE s.id = c.signal_id AND i.id = s.instance_id
                   AND i.claimed_by = c.worker AND i.attempt = c.attempt AND i.status = 'executing'
                   AND %s""".formatted(ClaimStamp.matches("i", "c.claim_xid")));
        this.wokenParents = tables.render("""
                SELECT id, queue, status, type FROM {instances}
                 WHERE id = ANY($1) AND status = 'runnable' AND children_pending <= 0""");
    }

    /** Commits the outcomes; emits the transition of each one that was not stale. */
    public Flux<Transition> commit(Connection connection, List<OutcomeRow> outcomes) {
        requireSorted(outcomes);
        return Flux.from(columns.bind(connection.createStatement(commit), 0, outcomes).execute())
                .concatMap(result -> result.map(Transition::read))
                .onErrorMap(Errors::translate);
    }

    /** Whether an outcome can take the fast path: it settles its row and carries no rider. */
    public static boolean settlesPlainly(OutcomeRow outcome) {
        return outcome.status().isTerminal() && !outcome.hasRiders();
    }

    /** Commits settling outcomes on the fast path ({@link #settlesPlainly}); emits each one's transition. */
    public Flux<Transition> settle(Connection connection, List<OutcomeRow> outcomes) {
        requireSorted(outcomes);
        return Flux.from(settleColumns.bind(connection.createStatement(settle), 0, outcomes).execute())
                .concatMap(result -> result.map(Transition::read))
                .onErrorMap(Errors::translate);
    }

    /** The commits find each row's outcome by binary search over the ids ({@link #GUARD}): they come sorted. */
    private static void requireSorted(List<OutcomeRow> outcomes) {
        for (int i = 1; i < outcomes.size(); i++) {
            if (outcomes.get(i - 1).id() > outcomes.get(i).id()) {
                throw new IllegalArgumentException("outcomes must come sorted by id");
            }
        }
    }

    public Mono<Void> lockForCommit(Connection connection, Collection<Long> ids) {
        return Flux.from(connection.createStatement(lockForCommit).bind(0, ids.toArray(Long[]::new)).execute())
                .concatMap(result -> result.map(row -> 1))
                .then();
    }

    /**
     * Begins a transaction on {@code connection} that the server ends should it sit idle past
     * {@code idle}, its statements each bounded by {@code statements} ({@link #BEGIN_BOUNDED}).
     */
    public Mono<Void> beginBounded(Connection connection, Duration idle, Duration statements) {
        return Db.executeScript(connection, BEGIN_BOUNDED.formatted(millis(idle), millis(statements)));
    }

    /** Readies the transaction open on {@code connection} for the outcome ({@link #BEFORE_OUTCOME}). */
    public Mono<Void> beforeOutcome(Connection connection, Duration statements) {
        return Db.executeScript(connection, BEFORE_OUTCOME.formatted(millis(statements)));
    }

    /**
     * Locks row {@code id} when it is still claimed by {@code worker} at {@code attempt} and
     * {@code step}, by transaction {@code claimXid}; emits whether its cancel was requested, or nothing
     * when the claim is not current.
     */
    public Mono<Boolean> lockClaim(Connection connection, long id, String worker, int attempt, String step,
            long claimXid) {
        return Flux.from(connection.createStatement(lockClaim).bind(0, id).bind(1, worker).bind(2, attempt)
                        .bind(3, step).bind(4, claimXid).execute())
                .concatMap(result -> result.map(row -> Boolean.TRUE.equals(row.get(0, Boolean.class))))
                .next()
                .onErrorMap(Errors::translate);
    }

    private static long millis(Duration duration) {
        return Math.max(1, duration.toMillis());
    }

    /** Marks signals consumed, each guarded by the claim (worker, attempt, transaction) of the step that consumed it. */
    public Mono<Void> consumeSignals(Connection connection, List<Long> signalIds, List<String> workers,
            List<Integer> attempts, List<Long> claimXids) {
        return Flux.from(connection.createStatement(consumeSignals)
                        .bind(0, signalIds.toArray(Long[]::new))
                        .bind(1, workers.toArray(String[]::new))
                        .bind(2, attempts.toArray(Integer[]::new))
                        .bind(3, claimXids.toArray(Long[]::new)).execute())
                .concatMap(result -> result.getRowsUpdated())
                .then();
    }

    public Flux<Transition> wokenParents(Connection connection, Collection<Long> parentIds) {
        return Flux.from(connection.createStatement(wokenParents).bind(0, parentIds.toArray(Long[]::new)).execute())
                .concatMap(result -> result.map(Transition::read));
    }
}
