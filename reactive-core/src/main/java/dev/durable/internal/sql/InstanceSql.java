package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.Rows.CancelRow;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The client's statements on instances: insert, read, list, cancel, and the clock. */
public final class InstanceSql {

    /** A row to insert and the local worker that claims it as it is inserted (null for none). */
    public record Insertion(NewInstance row, @Nullable String claimer) {
    }

    /**
     * An inserted row's id, whether it was due at once by the database clock (only such rows are
     * worth a poke), and, when the insert claimed it, the claim.
     */
    public record Inserted(long id, boolean due, @Nullable ClaimedRow claim) {
    }

    /**
     * What a request of an insert that skips duplicates came to: the row it inserted, or the id of
     * the live instance that holds its correlation key. Neither when the holder could not be named
     * in the statement's snapshot (see {@link #insertSkippingDuplicates}): ask again.
     */
    public record Placed(@Nullable Inserted inserted, @Nullable Long heldBy) {
    }

    /** How a request of {@link #insertWithPolicies} was placed (as {@code InsertResult.Disposition}). */
    public enum Placement {
        INSERTED, SKIPPED, REPLACED, FOLLOW_UP
    }

    /**
     * What a request of {@link #insertWithPolicies} came to: the row it inserted ({@code inserted},
     * with its claim), else the id that answers it (the holder, or the follow-up's id) and whether
     * the holder it changed is due now (a replaced holder made due is worth a poke).
     */
    public record Resolved(Placement placement, long id, boolean due, @Nullable Inserted inserted) {
    }

    /** An instance a settle-waiter watches, with the status it last saw it in (null: read it in full). */
    public record Watch(long id, @Nullable InstanceStatus seen) {
    }

    /** The most ids one read of {@link #watch} sends in one statement; more go in further statements. */
    public static final int WATCH_IDS_PER_STATEMENT = 1000;

    private static final Columns<Insertion> INSERT_COLUMNS = insertColumns().build();

    /**
     * The insert's columns and each request's conflict policy: its kind, and a debounce's window and
     * maxWait in milliseconds (null for none).
     */
    private static final Columns<Insertion> POLICY_COLUMNS = insertColumns()
            .text("policy", i -> i.row().onConflict().kind().name().toLowerCase(java.util.Locale.ROOT))
            .bigint("window_ms", i -> i.row().onConflict().window() == null ? null
                    : i.row().onConflict().window().toMillis())
            .bigint("max_wait_ms", i -> i.row().onConflict().maxWait() == null ? null
                    : i.row().onConflict().maxWait().toMillis())
            .build();

    private static Columns.Builder<Insertion> insertColumns() {
        return Columns.<Insertion>builder()
            .text("type", i -> i.row().type())
            .integer("type_version", i -> i.row().typeVersion())
            .text("queue", i -> i.row().queue())
            .integer("priority", i -> i.row().priority())
            .text("step", i -> i.row().step())
            .text("state", i -> i.row().stateJson())
            .integer("max_attempts", i -> i.row().maxAttempts())
            .text("run_at", i -> i.row().runAt())
            .bigint("delay_ms", i -> i.row().delayMillis())
            .bigint("parent_id", i -> i.row().parentId())
            .text("concurrency_key", i -> i.row().concurrencyKey())
            .text("correlation_key", i -> i.row().correlationKey())
            .text("occupied", i -> i.row().occupiedStatuses())
            .text("gate", i -> i.row().gate())
            .integer("gate_shards", i -> i.row().gateShards())
            .rateSlot(i -> i.row().rate())
            .windowSlot(i -> i.row().window())
            .text("trace_context", i -> i.row().traceContext())
            .text("fairness_key", i -> i.row().fairnessKey())
            .text("claimer", Insertion::claimer);
    }

    /** Columns of {@link Instance}, in the order the row mapper reads them. */
    static final String INSTANCE_COLUMNS = """
            id, type, type_version, queue, priority, status, step, state::text AS state,
            result::text AS result, last_error, attempt, max_attempts, eligible_at, awaited_signals,
            await_deadline, parent_id, children_pending, concurrency_key, correlation_key, claimed_by,
            lease_expires_at, cancel_requested, inserted_at, updated_at""";

    /**
     * Inserts many instances in one round trip from parallel arrays. WITH ORDINALITY and ORDER BY
     * keep identity values, and so the returned rows, in the order of the request. A row's eligible
     * time is its absolute run-at when given, else now() plus its delay. A row with a claimer is
     * inserted already claimed by that idle local worker with a lease of the last parameter's ms (claim-on-insert,
     * which saves an idle queue the pick's round trip).
     * Index: writes the primary key, then the pick index (runnable) or the lease index (claimed),
     * and the correlation index for a keyed row. Locks: none but the new rows; a live correlation
     * key that another transaction is inserting waits for it, then is refused as a duplicate.
     * It answers each row's claim columns (what a claimed row's run needs); the other forms below
     * answer less or send less.
     */
    private final String insert;

    /**
     * As {@link #insert}, for a batch none of whose rows is claimed: it answers only each row's id
     * and whether it is due, not the two dozen claim columns a claimed row needs.
     */
    private final String insertUnclaimed;

    /**
     * As {@link #insert}, for one row: its values bound as scalars ({@code VALUES}), not as
     * one-element arrays to unnest.
     */
    private final String insertOne;

    /** As {@link #insertOne}, for a row that is not claimed: answers its id and whether it is due. */
    private final String insertOneUnclaimed;

    /**
     * As {@link #insert}, but a request whose correlation key is live (held by a row, or by an
     * earlier request of the same batch) is skipped instead of failing the batch, and answered
     * with the id of the holder. One round trip:
     * <ol>
     * <li>{@code u} numbers the requests, draws each its id from the table's identity sequence up
     *     front (so the answer of each request can be found by id, whether its row went in or not)
     *     and works out its slot: the key when the row's first status occupies it, else null;
     * <li>{@code ins} inserts them in (slot, request) order with ON CONFLICT DO NOTHING on
     *     durable_instances_correlation_uq, so the first request of a repeated key wins and two
     *     such batches take their keys in one order (no deadlock between them). A key that another
     *     transaction is inserting waits for it: taken if it commits, ours if it rolls back;
     * <li>{@code held} names the holders of the skipped keys from the statement's snapshot, with
     *     FOR KEY SHARE. It reads after {@code ins} (it needs the set of ids {@code ins} returned),
     *     and the lock makes PostgreSQL re-check each row's latest committed version, so a holder
     *     that settled meanwhile is not named. A holder that committed after the snapshot is not
     *     seen at all: that request comes back with neither row nor holder, and the caller asks
     *     again in a new statement, whose snapshot sees it (or finds the key free and inserts);
     * <li>the answer, in request order: the inserted row, else the row of this batch that took
     *     the key, else the holder.
     * </ol>
     * Index: as {@link #insert}; the holders through durable_instances_correlation_uq. Locks: the
     * new rows, and a key-share lock on each named holder (it blocks neither commits nor picks'
     * status updates, only deletion, until this statement's transaction ends).
     */
    private final String insertSkippingDuplicates;

    /**
     * As {@link #insert}, with each request's conflict policy applied where its correlation key is
     * live, in one round trip ({@code ConflictPolicy}):
     * <ol>
     * <li>{@code u} numbers the requests, draws each its id up front (an inserted row's id, or the
     *     id a follow-up will have), and works out its run time (a debounce: now plus its window),
     *     its debounce bound (now plus maxWait; 'infinity' for none) and its slot (the key when the
     *     row's first status occupies it);
     * <li>{@code rejecting} inserts the requests that reject a live key, without ON CONFLICT: a live
     *     key fails the statement, and so the batch, with a unique violation as {@link #insert};
     * <li>{@code skipping} inserts the skip requests with ON CONFLICT DO UPDATE that changes nothing
     *     but the lock it takes: a holder that committed after the snapshot is still found and named
     *     in this statement (DO NOTHING would answer nothing), at the cost of a row version;
     * <li>{@code replacing} inserts replace and debounce requests with ON CONFLICT DO UPDATE on the
     *     latest committed version of the holder, so racing inserts of one key from many engines
     *     serialise on its row: a holder that has not started (runnable, never claimed, at the
     *     request's step, of its type) takes the state, priority and run time (for a debounce: the
     *     earlier of the window's end and the holder's bound); one that has started keeps a
     *     follow-up, the request as the row the settle trigger of migration 6 inserts (its id
     *     kept from the first follow-up); a settled holder (its key occupied in a terminal
     *     status) is left alone. A replace clears the debounce bound, a debounce keeps the first;
     * <li>the answer, in request order, joins each request to the row it inserted (by id) or its
     *     holder (by slot: a key comes once per such batch, {@code RequestMapper}).
     * </ol>
     * Keys are taken in slot order within each insert, so two such batches wait for each other
     * rather than deadlock, except across the two upserts (a deadlock then goes again).
     * Index: as {@link #insert}; holders through durable_instances_correlation_uq. Locks: the new
     * rows and each holder, until the transaction ends.
     */
    private final String insertWithPolicies;

    /** As {@link #insertWithPolicies}, when no request is claimed: answers ids and placements, no claim columns. */
    private final String insertWithPoliciesUnclaimed;

    /** One instance. Index: primary key. Locks: none. */
    private final String select;

    /**
     * The settle-waiters' shared read: of the watched ids (at most
     * {@link #WATCH_IDS_PER_STATEMENT}), the instances whose status is not the one the waiter last
     * saw (a null seen status always differs), so an unchanged instance costs an index probe and no
     * row. An id that comes back in no row while its seen status was null has no instance.
     * Index: primary key ({@code id = ANY}), then a hashed anti-join against the seen statuses.
     * Locks: none.
     */
    private final String watch;

    /**
     * A page of instances by optional queue and status, keyset-paginated on id. For dashboards and
     * tests, not a hot path. Index: with its optional filters the plan walks both tables' primary
     * keys, merged in id order.
     * Locks: none.
     */
    private final String list;

    /**
     * Cancels an instance, and with $2 its live descendants: at once when runnable or parked, at
     * the next commit when executing (the flag is read by the outcome commit, the release and the
     * reaper). Returns the root's status before and after (after is null when it had settled).
     * Index: primary key, then the parent index down the family. Locks: each live row of the
     * family, so a concurrent pick or commit of one of them sees one answer.
     */
    private final String cancel;

    /**
     * Instances of the given queues that are due now or running: what awaitIdle waits to see reach
     * zero. Index: the pick index for runnable rows, the lease index for executing ones. A row waiting
     * behind its concurrency key's head (migration 13) is counted through that head. Locks: none.
     */
    private final String countBusy;

    /** The database clock: every time Durable reasons about comes from here. Index: none. Locks: none. */
    private static final String NOW = "SELECT now()";

    private final Db db;

    /** What an insert that claims answers: the claim, and whether the row is due. */
    private static final String CLAIMED = ClaimColumns.SELECT + ", i.eligible_at <= now() AS due";
    /** What an insert that claims nothing answers: the ids (in request order) and whether each is due (to poke). */
    private static final String UNCLAIMED = "i.id, i.eligible_at <= now() AS due";

    /** The insert over {@code source} (the rows as {@code u}, numbered by {@code ord}), answering {@code returning}. */
    private static String insert(Tables tables, String source, String returning) {
        return tables.render("""
                INSERT INTO {instances} AS i (type, type_version, queue, priority, step, state, max_attempts,
                                         eligible_at, parent_id, concurrency_key, correlation_key,
                                         correlation_statuses, gate_name, gate_shard, rate_limit, rate_weight,
                                         rate_partition, window_name, window_weight, window_partition, fairness_key, status, claimed_by, lease_expires_at, attempt,
                                         trace_context)
                SELECT u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb, u.max_attempts,
                       COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond'),
                       u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ','),
                       u.gate, CASE WHEN u.gate IS NOT NULL THEN floor(random() * u.gate_shards)::int END,
                       u.rate_limit, CASE WHEN u.rate_limit IS NOT NULL THEN u.rate_weight END, u.rate_partition,
                       u.window_name, CASE WHEN u.window_name IS NOT NULL THEN u.window_weight END, u.window_partition,
                       u.fairness_key,
                       CASE WHEN u.claimer IS NULL THEN 'runnable' ELSE 'executing' END, u.claimer,
                       CASE WHEN u.claimer IS NOT NULL THEN now() + $%d * interval '1 millisecond' END,
                       CASE WHEN u.claimer IS NULL THEN 0 ELSE 1 END, u.trace_context
                  FROM\s""".formatted(INSERT_COLUMNS.size() + 1) + source + """

                 ORDER BY u.ord
                RETURNING\s""" + returning);
    }

    public InstanceSql(Db db, Tables tables) {
        this.db = db;
        this.insert = insert(tables, INSERT_COLUMNS.unnest(1, "u", true), CLAIMED);
        this.insertUnclaimed = insert(tables, INSERT_COLUMNS.unnest(1, "u", true), UNCLAIMED);
        this.insertOne = insert(tables, INSERT_COLUMNS.values(1, "u", true), CLAIMED);
        this.insertOneUnclaimed = insert(tables, INSERT_COLUMNS.values(1, "u", true), UNCLAIMED);
        this.insertSkippingDuplicates = tables.render("""
                WITH u AS MATERIALIZED (
                    SELECT u.*, nextval(pg_get_serial_sequence('{instances}', 'id')) AS new_id,
                           CASE WHEN u.claimer IS NULL THEN 'runnable' ELSE 'executing' END AS first_status
                      FROM\s""" + INSERT_COLUMNS.unnest(1, "u", true) + """

                ), slotted AS (
                    SELECT u.*, CASE WHEN u.first_status = ANY (string_to_array(u.occupied, ','))
                                     THEN u.correlation_key END AS slot
                      FROM u
                ), ins AS (
                    INSERT INTO {instances} AS i (id, type, type_version, queue, priority, step, state, max_attempts,
                                             eligible_at, parent_id, concurrency_key, correlation_key,
                                             correlation_statuses, gate_name, gate_shard, rate_limit, rate_weight,
                                             rate_partition, window_name, window_weight, window_partition, fairness_key, status, claimed_by, lease_expires_at, attempt,
                                             trace_context)
                    SELECT u.new_id, u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb,
                           u.max_attempts,
                           COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond'),
                           u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ','),
                           u.gate, CASE WHEN u.gate IS NOT NULL THEN floor(random() * u.gate_shards)::int END,
                           u.rate_limit, CASE WHEN u.rate_limit IS NOT NULL THEN u.rate_weight END, u.rate_partition,
                           u.window_name, CASE WHEN u.window_name IS NOT NULL THEN u.window_weight END, u.window_partition,
                           u.fairness_key,
                           u.first_status, u.claimer,
                           CASE WHEN u.claimer IS NOT NULL THEN now() + $%d * interval '1 millisecond' END,
                           CASE WHEN u.claimer IS NULL THEN 0 ELSE 1 END, u.trace_context
                      FROM slotted u
                     ORDER BY u.slot NULLS LAST, u.ord
                    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING
                    RETURNING\s""".formatted(INSERT_COLUMNS.size() + 1) + ClaimColumns.SELECT
                + ", i.eligible_at <= now() AS due" + """

                ), taken AS (
                    SELECT s.slot, s.new_id FROM slotted s JOIN ins ON ins.id = s.new_id WHERE s.slot IS NOT NULL
                ), held AS (
                    SELECT h.id, h.correlation_slot
                      FROM {instances} h
                     WHERE h.correlation_slot = ANY (ARRAY(
                               SELECT s.slot FROM slotted s
                                WHERE s.slot IS NOT NULL AND s.new_id NOT IN (SELECT id FROM ins)))
                       FOR KEY SHARE OF h
                )
                SELECT ins.*, COALESCE(taken.new_id, held.id) AS held_by
                  FROM slotted s
                  LEFT JOIN ins ON ins.id = s.new_id
                  LEFT JOIN taken ON ins.id IS NULL AND taken.slot = s.slot
                  LEFT JOIN held ON ins.id IS NULL AND held.correlation_slot = s.slot
                 ORDER BY s.ord""");
        String into = """
                INSERT INTO {instances} AS i (id, type, type_version, queue, priority, step, state, max_attempts,
                                         eligible_at, parent_id, concurrency_key, correlation_key,
                                         correlation_statuses, gate_name, gate_shard, rate_limit, rate_weight,
                                         rate_partition, window_name, window_weight, window_partition, fairness_key, status, claimed_by, lease_expires_at, attempt,
                                         debounce_until, trace_context)
                SELECT u.new_id, u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb, u.max_attempts,
                       u.run_time, u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ','),
                       u.gate, CASE WHEN u.gate IS NOT NULL THEN floor(random() * u.gate_shards)::int END,
                       u.rate_limit, CASE WHEN u.rate_limit IS NOT NULL THEN u.rate_weight END, u.rate_partition,
                       u.window_name, CASE WHEN u.window_name IS NOT NULL THEN u.window_weight END, u.window_partition,
                       u.fairness_key,
                       u.first_status, u.claimer,
                       CASE WHEN u.claimer IS NOT NULL THEN now() + $%d * interval '1 millisecond' END,
                       CASE WHEN u.claimer IS NULL THEN 0 ELSE 1 END, u.bound, u.trace_context
                  FROM slotted u""".formatted(POLICY_COLUMNS.size() + 1);
        String conflict = "ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO UPDATE SET ";
        // What the answer reads of a row; a request that is not claimed needs its id and what places it.
        String placing = ", i.status, i.correlation_slot, i.eligible_at <= now() AS due,"
                + " (i.follow_up->>'id')::bigint AS follow_up_id";
        String claimedReturning = "RETURNING " + ClaimColumns.SELECT + placing;
        String unclaimedReturning = "RETURNING i.id, i.claimed_by, i.type, i.step, i.attempt" + placing;
        String settled = "i.status IN ('done', 'failed', 'cancelled')";
        // Same type and version too: a holder of another version keeps its state's shape (a follow-up is queued).
        String fresh = "(i.status = 'runnable' AND i.attempt = 0 AND i.step = EXCLUDED.step"
                + " AND i.type = EXCLUDED.type AND i.type_version = EXCLUDED.type_version)";
        // For a debounce, the run time is the earlier of the window's end and the first insert's bound.
        String debounced = "LEAST(EXCLUDED.eligible_at, COALESCE(%s, EXCLUDED.debounce_until))";
        String followBound = "(i.follow_up->>'debounce_until')::timestamptz";
        java.util.function.Function<String, String> policies = returning -> tables.render("""
                WITH u AS MATERIALIZED (
                    SELECT u.*, nextval(pg_get_serial_sequence('{instances}', 'id')) AS new_id,
                           CASE WHEN u.claimer IS NULL THEN 'runnable' ELSE 'executing' END AS first_status,
                           CASE WHEN u.policy = 'debounce' THEN now() + u.window_ms * interval '1 millisecond'
                                ELSE COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond')
                           END AS run_time,
                           CASE WHEN u.policy = 'debounce'
                                THEN COALESCE(now() + u.max_wait_ms * interval '1 millisecond', 'infinity') END AS bound
                      FROM\s""" + POLICY_COLUMNS.unnest(1, "u", true) + """

                ), slotted AS (
                    SELECT u.*, CASE WHEN u.first_status = ANY (string_to_array(u.occupied, ','))
                                     THEN u.correlation_key END AS slot
                      FROM u
                ), rejecting AS (
                """ + into + """
                 WHERE u.policy = 'reject'
                 ORDER BY u.ord
                """ + returning + """

                ), skipping AS (
                """ + into + """
                 WHERE u.policy = 'skip'
                 ORDER BY u.slot NULLS LAST, u.ord
                """ + conflict + "updated_at = i.updated_at\n" + returning + """

                ), replacing AS (
                """ + into + """
                 WHERE u.policy IN ('replace', 'debounce')
                 ORDER BY u.slot NULLS LAST, u.ord
                """ + conflict + """
                    state = CASE WHEN %1$s THEN EXCLUDED.state ELSE i.state END,
                    priority = CASE WHEN %1$s THEN EXCLUDED.priority ELSE i.priority END,
                    eligible_at = CASE WHEN NOT %1$s THEN i.eligible_at
                                       WHEN EXCLUDED.debounce_until IS NULL THEN EXCLUDED.eligible_at
                                       ELSE %3$s END,
                    debounce_until = CASE WHEN NOT %1$s THEN i.debounce_until
                                          WHEN EXCLUDED.debounce_until IS NULL THEN NULL
                                          ELSE COALESCE(i.debounce_until, EXCLUDED.debounce_until) END,
                    follow_up = CASE WHEN %1$s OR %2$s THEN i.follow_up ELSE jsonb_build_object(
                        'id', COALESCE((i.follow_up->>'id')::bigint, EXCLUDED.id),
                        'type', EXCLUDED.type, 'type_version', EXCLUDED.type_version, 'queue', EXCLUDED.queue,
                        'priority', EXCLUDED.priority, 'step', EXCLUDED.step, 'state', EXCLUDED.state,
                        'max_attempts', EXCLUDED.max_attempts,
                        'eligible_at', CASE WHEN EXCLUDED.debounce_until IS NULL THEN EXCLUDED.eligible_at
                                            ELSE %4$s END,
                        'debounce_until', CASE WHEN EXCLUDED.debounce_until IS NOT NULL
                                               THEN COALESCE(%5$s, EXCLUDED.debounce_until) END,
                        'concurrency_key', EXCLUDED.concurrency_key, 'correlation_key', EXCLUDED.correlation_key,
                        'correlation_statuses', to_jsonb(EXCLUDED.correlation_statuses),
                        'gate_name', EXCLUDED.gate_name, 'gate_shard', EXCLUDED.gate_shard,
                        'rate_limit', EXCLUDED.rate_limit, 'rate_weight', EXCLUDED.rate_weight,
                        'rate_partition', EXCLUDED.rate_partition, 'trace_context', EXCLUDED.trace_context,
                        'fairness_key', EXCLUDED.fairness_key, 'window_name', EXCLUDED.window_name,
                        'window_weight', EXCLUDED.window_weight, 'window_partition', EXCLUDED.window_partition) END,
                    updated_at = CASE WHEN %2$s THEN i.updated_at ELSE now() END
                """.formatted(fresh, settled, debounced.formatted("i.debounce_until"), debounced.formatted(followBound),
                        followBound) + returning + """

                ), placed AS (
                    SELECT * FROM rejecting UNION ALL SELECT * FROM skipping UNION ALL SELECT * FROM replacing
                )
                SELECT p.*, CASE WHEN p.id = s.new_id THEN 'inserted'
                                 WHEN s.policy = 'skip' OR p.status IN ('done', 'failed', 'cancelled') THEN 'skipped'
                                 WHEN p.status = 'runnable' AND p.attempt = 0 AND p.step = s.step AND p.type = s.type
                                 THEN 'replaced'
                                 ELSE 'follow_up' END AS placement
                  FROM slotted s
                  JOIN placed p ON p.id = s.new_id
                                OR (p.correlation_slot = s.slot AND p.id NOT IN (SELECT new_id FROM slotted))
                 ORDER BY s.ord""");
        this.insertWithPolicies = policies.apply(claimedReturning);
        this.insertWithPoliciesUnclaimed = policies.apply(unclaimedReturning);
        // Reads see live and settled instances alike through the view of both tables; its simple
        // UNION ALL lets each filter, and the list's id order and limit, reach both primary keys.
        this.select = tables.render("SELECT " + INSTANCE_COLUMNS + " FROM {instances_all} WHERE id = $1");
        this.watch = tables.render("SELECT " + INSTANCE_COLUMNS + "\n" + """
                 FROM {instances_all} i
                 WHERE i.id = ANY ($1::bigint[])
                   AND NOT EXISTS (SELECT 1 FROM unnest($1::bigint[], $2::text[]) AS w(wid, seen)
                                    WHERE w.wid = i.id AND w.seen = i.status)""");
        this.list = tables.render("SELECT " + INSTANCE_COLUMNS + "\n" + """
                 FROM {instances_all}
                 WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR status = $2) AND id > $3
                 ORDER BY id
                 LIMIT $4""");
        String idle = "i.id = t.id AND i.status NOT IN ('done', 'failed', 'cancelled', 'executing')";
        this.cancel = tables.render("""
                WITH RECURSIVE tree AS (
                        SELECT id FROM {instances} WHERE id = $1
                    UNION
                        SELECT c.id FROM {instances} c JOIN tree t ON c.parent_id = t.id WHERE $2
                ), root AS (
                    SELECT status, queue, type FROM {instances} WHERE id = $1
                     UNION ALL
                    SELECT status, queue, type FROM {history} WHERE id = $1
                ),\s""" + Settled.move("tree t", idle, "'cancelled'", "i.step", "i.state", "i.result", "i.last_error",
                        "i.attempt") + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = CASE WHEN i.status = 'executing' THEN i.status ELSE 'cancelled' END,
                           cancel_requested = (i.status = 'executing'),
                           await_deadline = NULL,
                           updated_at = now()
                      FROM tree t
                     WHERE i.id = t.id AND i.status NOT IN ('done', 'failed', 'cancelled')
                       AND NOT (i.status <> 'executing' AND %s)
                    RETURNING i.id, i.status
                ), changed AS (
                    SELECT id, status FROM moved UNION ALL SELECT id, status FROM kept
                )
                SELECT r.status AS before, c.status AS after, r.queue, r.type
                  FROM root r LEFT JOIN changed c ON c.id = $1""".formatted(Settled.settlesWhere("'cancelled'")));
        this.countBusy = tables.render("SELECT (SELECT count(*) FROM {instances} WHERE queue = ANY($1)"
                + " AND status = 'runnable' AND NOT key_waiting AND eligible_at <= now() + $2 * interval '1 millisecond')"
                + " + (SELECT count(*) FROM {instances} WHERE status = 'executing' AND queue = ANY($1))");
    }

    /** Inserts the rows in one round trip on a pooled connection; emits them in request order. */
    public Flux<Inserted> insert(List<Insertion> rows, long leaseMillis) {
        return db.withConnection(connection -> insert(connection, rows, leaseMillis));
    }

    /** Inserts on the caller's connection, inside whatever transaction it has open. */
    public Flux<Inserted> insert(Connection connection, List<Insertion> rows, long leaseMillis) {
        boolean claims = rows.stream().anyMatch(row -> row.claimer() != null);
        Statement statement;
        if (rows.size() == 1) {
            statement = INSERT_COLUMNS.bindOne(connection.createStatement(claims ? insertOne : insertOneUnclaimed), 0,
                    rows.get(0));
        } else {
            statement = INSERT_COLUMNS.bind(connection.createStatement(claims ? insert : insertUnclaimed), 0, rows);
        }
        statement.bind(INSERT_COLUMNS.size(), leaseMillis);
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(claims ? InstanceSql::inserted : InstanceSql::unclaimed))
                .onErrorMap(Errors::translate);
    }

    /**
     * Inserts the rows in one round trip, skipping each whose correlation key is live; emits, in
     * request order, what became of each ({@link #insertSkippingDuplicates}).
     */
    public Flux<Placed> insertSkippingDuplicates(List<Insertion> rows, long leaseMillis) {
        return db.withConnection(connection -> {
            Statement statement = INSERT_COLUMNS.bind(connection.createStatement(insertSkippingDuplicates), 0, rows)
                    .bind(INSERT_COLUMNS.size(), leaseMillis);
            return Flux.from(statement.execute())
                    .concatMap(result -> result.map(row -> row.get("id", Long.class) != null
                            ? new Placed(inserted(row), null)
                            : new Placed(null, row.get("held_by", Long.class))));
        });
    }

    /**
     * Inserts the rows in one round trip under their conflict policies ({@link #insertWithPolicies});
     * emits, in request order, what became of each. On a pooled connection, or on the caller's.
     */
    public Flux<Resolved> insertWithPolicies(List<Insertion> rows, long leaseMillis) {
        return db.withConnection(connection -> insertWithPolicies(connection, rows, leaseMillis));
    }

    /** As {@link #insertWithPolicies(List, long)}, on the caller's connection and transaction. */
    public Flux<Resolved> insertWithPolicies(Connection connection, List<Insertion> rows, long leaseMillis) {
        boolean claims = rows.stream().anyMatch(row -> row.claimer() != null);
        return Flux.from(bindPolicies(connection.createStatement(claims ? insertWithPolicies : insertWithPoliciesUnclaimed),
                        rows, leaseMillis).execute())
                .concatMap(result -> result.map(row -> resolved(row, claims)))
                .onErrorMap(Errors::translate);
    }

    /** Binds the parameters of {@link #insertWithPolicies} (also for HotPlansIT's EXPLAIN). */
    static Statement bindPolicies(Statement statement, List<Insertion> rows, long leaseMillis) {
        return POLICY_COLUMNS.bind(statement, 0, rows).bind(POLICY_COLUMNS.size(), leaseMillis);
    }

    private static Resolved resolved(Readable row, boolean claims) {
        Placement placement = Placement.valueOf(row.get("placement", String.class).toUpperCase(java.util.Locale.ROOT));
        boolean due = Boolean.TRUE.equals(row.get("due", Boolean.class));
        return switch (placement) {
            case INSERTED -> new Resolved(placement, row.get("id", Long.class), due, claims ? inserted(row) : unclaimed(row));
            case FOLLOW_UP -> new Resolved(placement, row.get("follow_up_id", Long.class), false, null);
            default -> new Resolved(placement, row.get("id", Long.class), due, null);
        };
    }

    private static Inserted unclaimed(Readable row) {
        return new Inserted(row.get("id", Long.class), Boolean.TRUE.equals(row.get("due", Boolean.class)), null);
    }

    private static Inserted inserted(Readable row) {
        return new Inserted(row.get("id", Long.class), Boolean.TRUE.equals(row.get("due", Boolean.class)),
                row.get("claimed_by", String.class) == null ? null : ClaimColumns.read(row));
    }

    /**
     * The watched instances whose status differs from the one seen, in statements of at most
     * {@link #WATCH_IDS_PER_STATEMENT} ids, one after the other on one connection.
     */
    public Flux<Instance> watch(List<Watch> watches) {
        if (watches.isEmpty()) {
            return Flux.empty();
        }
        List<List<Watch>> chunks = new java.util.ArrayList<>();
        for (int from = 0; from < watches.size(); from += WATCH_IDS_PER_STATEMENT) {
            chunks.add(watches.subList(from, Math.min(watches.size(), from + WATCH_IDS_PER_STATEMENT)));
        }
        return db.withConnection(connection -> Flux.fromIterable(chunks).concatMap(chunk -> {
            Long[] ids = new Long[chunk.size()];
            String[] seen = new String[chunk.size()];
            for (int i = 0; i < chunk.size(); i++) {
                ids[i] = chunk.get(i).id();
                InstanceStatus status = chunk.get(i).seen();
                seen[i] = status == null ? null : status.sqlName();
            }
            return Flux.from(connection.createStatement(watch).bind(0, ids).bind(1, seen).execute())
                    .concatMap(result -> result.map(InstanceSql::toInstance));
        }));
    }

    public Mono<Instance> get(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(select).bind(0, id).execute())
                        .concatMap(result -> result.map(InstanceSql::toInstance)))
                .next();
    }

    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(list);
            Db.bind(statement, 0, queue, String.class);
            Db.bind(statement, 1, status == null ? null : status.sqlName(), String.class);
            statement.bind(2, afterId).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceSql::toInstance));
        });
    }

    /** Empty when no instance has that id. */
    public Mono<CancelRow> cancel(long id, boolean cascade) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(cancel)
                        .bind(0, id).bind(1, cascade).execute())
                .concatMap(result -> result.map(row -> {
                    String after = row.get("after", String.class);
                    return new CancelRow(InstanceStatus.fromSql(row.get("before", String.class)),
                            after == null ? null : InstanceStatus.fromSql(after), row.get("queue", String.class),
                            row.get("type", String.class));
                })))
                .next();
    }

    /** How many instances of the queues are due now or running. */
    /** Rows of the queues running, or runnable and due within {@code horizonMillis}. */
    public Mono<Long> countBusy(Collection<String> queues, long horizonMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(countBusy)
                        .bind(0, queues.toArray(String[]::new)).bind(1, horizonMillis).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))).single();
    }

    /** The database's clock. */
    public Mono<Instant> now() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(NOW).execute())
                .concatMap(result -> result.map(row -> row.get(0, Instant.class)))).single();
    }

    static Instance toInstance(Readable row) {
        String[] awaited = row.get("awaited_signals", String[].class);
        Boolean cancelRequested = row.get("cancel_requested", Boolean.class);
        return new Instance(
                row.get("id", Long.class),
                row.get("type", String.class),
                row.get("type_version", Integer.class),
                row.get("queue", String.class),
                row.get("priority", Integer.class),
                InstanceStatus.fromSql(row.get("status", String.class)),
                row.get("step", String.class),
                row.get("state", String.class),
                row.get("result", String.class),
                row.get("last_error", String.class),
                row.get("attempt", Integer.class),
                row.get("max_attempts", Integer.class),
                row.get("eligible_at", Instant.class),
                Arrays.asList(awaited == null ? new String[0] : awaited),
                row.get("await_deadline", Instant.class),
                row.get("parent_id", Long.class),
                row.get("children_pending", Integer.class),
                row.get("concurrency_key", String.class),
                row.get("correlation_key", String.class),
                row.get("claimed_by", String.class),
                row.get("lease_expires_at", Instant.class),
                Boolean.TRUE.equals(cancelRequested),
                row.get("inserted_at", Instant.class),
                row.get("updated_at", Instant.class));
    }
}
