package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.InsertSql.Inserted;
import dev.durable.internal.sql.InsertSql.Insertion;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;

/**
 * The insert under conflict policies ({@code ConflictPolicy}): each request whose correlation key
 * is live skips, replaces or debounces its holder, or queues a follow-up, in one round trip. Its
 * columns are {@link InsertSql}'s plus each request's policy.
 */
public final class PolicyInsertSql {

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

    /**
     * The insert's columns and each request's conflict policy: its kind, and a debounce's window and
     * maxWait in milliseconds (null for none).
     */
    private static final Columns<Insertion> POLICY_COLUMNS = InsertSql.insertColumns()
            .text("policy", i -> i.row().onConflict().kind().name().toLowerCase(java.util.Locale.ROOT))
            .bigint("window_ms", i -> i.row().onConflict().window() == null ? null
                    : i.row().onConflict().window().toMillis())
            .bigint("max_wait_ms", i -> i.row().onConflict().maxWait() == null ? null
                    : i.row().onConflict().maxWait().toMillis())
            .build();

    /**
     * As {@link InsertSql}'s plain insert, with each request's conflict policy applied where its correlation key is
     * live, in one round trip ({@code ConflictPolicy}):
     * <ol>
     * <li>{@code u} numbers the requests, draws each its id up front (an inserted row's id, or the
     *     id a follow-up will have), and works out its run time (a debounce: now plus its window),
     *     its debounce bound (now plus maxWait; 'infinity' for none) and its slot (the key when the
     *     row's first status occupies it);
     * <li>{@code rejecting} inserts the requests that reject a live key, without ON CONFLICT: a live
     *     key fails the statement, and so the batch, with a unique violation as the plain insert's;
     * <li>{@code skipping} inserts the skip requests with ON CONFLICT DO UPDATE that changes nothing
     *     but the lock it takes: a holder that committed after the snapshot is still found and named
     *     in this statement (DO NOTHING would answer nothing), at the cost of a row version;
     * <li>{@code replacing} inserts replace and debounce requests with ON CONFLICT DO UPDATE on the
     *     latest committed version of the holder, so racing inserts of one key from many engines
     *     serialise on its row: a holder that has not started (runnable, never claimed, at the
     *     request's step, of its type) takes the state, priority and run time (for a debounce: the
     *     earlier of the window's end and the holder's bound); one that has started keeps a
     *     follow-up, the request as the row the settle trigger (durable_follow_up) inserts (its id
     *     kept from the first follow-up); a settled holder (its key occupied in a terminal
     *     status) is left alone. A replace clears the debounce bound, a debounce keeps the first;
     * <li>the answer, in request order, joins each request to the row it inserted (by id) or its
     *     holder (by slot: a key comes once per such batch, {@code RequestMapper}).
     * </ol>
     * Keys are taken in slot order within each insert, so two such batches wait for each other
     * rather than deadlock, except across the two upserts (a deadlock then goes again).
     * Index: as the plain insert's; holders through durable_instances_correlation_uq. Locks: the new
     * rows and each holder, until the transaction ends.
     */
    private final String insertWithPolicies;

    /** As {@link #insertWithPolicies}, when no request is claimed: answers ids and placements, no claim columns. */
    private final String insertWithPoliciesUnclaimed;

    private final Db db;

    public PolicyInsertSql(Db db, Tables tables) {
        this.db = db;
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
            case INSERTED -> new Resolved(placement, row.get("id", Long.class), due, claims ? InsertSql.inserted(row) : InsertSql.unclaimed(row));
            case FOLLOW_UP -> new Resolved(placement, row.get("follow_up_id", Long.class), false, null);
            default -> new Resolved(placement, row.get("id", Long.class), due, null);
        };
    }
}
