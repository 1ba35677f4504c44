package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Leases: the heartbeat that keeps claims, the release that gives them back, the recovery of expired ones. */
public final class LeaseSql {

    /**
     * Renews the leases of every row one worker holds, in one statement per tick, whatever the
     * buffer's depth, and says for each row it still holds whether a cancel was requested. A held row
     * it does not return is no longer this worker's (reaped, released, settled), nor is one whose lease
     * has run out: an expired lease is lost even before the reaper comes (a worker back from a pause
     * must not revive a claim a lease-native limiter already gave away). The lease is no
     * index key, so the renewal is a HOT update. Index: primary key (id = ANY). Locks: each renewed
     * row, skipping rows another transaction holds: a commit of one of them may itself be waiting on
     * this heartbeat's new tuple of another (the unique check of the executing-key index waits for
     * the transaction that last wrote a conflicting row), so waiting would deadlock. A skipped row
     * is returned unrenewed ({@code renewed} false): still this worker's as of the statement's
     * snapshot, its lease left to the next beat (it is being settled, or the next beat renews it).
     */
    private final String heartbeat;

    /**
     * Gives claimed rows that never started back to runnable at once (graceful shutdown, a row
     * claimed twice by one worker, a cancelled row in the buffer), undoing the attempt their claim
     * took; a row whose cancel was requested ends cancelled. Guarded by worker and by the attempt
     * and the transaction each claim took, so an old claim never gives back a newer one, not even the
     * same worker's at the same attempt (a release sent on a connection that froze can arrive after
     * its claim was reaped and the row claimed again). Index: primary key. Locks: each released row.
     */
    private final String release;

    /**
     * The first statement of a recovery: looks at up to $4 ledger rows (durable_claims, schema version
     * 6) whose check time has come, and answers the ids among their claims that have lapsed. Of each
     * ledger row, the rows still executing under its claim (same worker and stamp) are found by
     * primary key; a ledger row with none left is deleted, the others wait until the earliest lease
     * among them (a heartbeat renews the rows' leases, not the ledger's). The reaper passes no prefix
     * and a zero margin; the startup reclaim passes its dead predecessors' identity prefix and a margin,
     * so it takes their rows before the lease runs out but never a live owner's freshly beaten one, and
     * looks at every ledger row of theirs whatever its check time (it runs once, at start).
     * Index: the ledger's check_at index, then the hot table's primary key (the listed ids as one
     * array, as the claim takes its ids, so that no plan joins them to a scan of the table). Locks: the
     * ledger rows looked at, skipping those another transaction holds (another node's reaper).
     */
    private final String sweepClaims;

    /**
     * The second statement: locks up to $3 of the lapsed claims $2 that still lapse (and, for the
     * startup reclaim, are still a dead predecessor's), oldest lease first, and returns what their
     * backoff depends on (type, attempt). Index: primary key. Locks: the rows returned, to the end of
     * the recovery's transaction, skipping rows another transaction holds (another node's reaper, a
     * commit: their ledger row keeps a past check time, so they are looked at again). A heartbeat of a
     * locked row waits for the recovery, then finds the row no longer its own.
     */
    private final String lockLapsed;

    /**
     * The third statement: settles the locked claims $1 with their retry delays $2 (ms, computed
     * from each type's backoff for the attempt the lost worker ran): runnable once the delay has
     * passed, failed once the attempts are spent (so a step that keeps killing its worker cannot
     * retry for ever), cancelled when a cancel was requested. The error names the lost worker.
     * A child settling here counts itself off its parent through the durable_child_settled trigger.
     * Index: primary key. Locks: the rows, which the transaction already holds, and the parents
     * the trigger updates.
     */
    private final String recoverLocked;

    /**
     * The fourth statement, when recovered children settled: the parents $1 the trigger woke, so the
     * engine pokes their queues instead of leaving them to the poll. Index: primary key. Locks: none.
     */
    private final String wokenParents;

    private final Db db;

    public LeaseSql(Db db, Tables tables) {
        this.db = db;
        this.heartbeat = tables.render("""
                WITH owned AS (
                    SELECT id, cancel_requested FROM {instances}
                     WHERE id = ANY ($1::bigint[]) AND claimed_by = $2 AND status = 'executing'
                       AND lease_expires_at > now()
                ), held AS (
                    SELECT id FROM {instances}
                     WHERE id = ANY ($1::bigint[]) AND claimed_by = $2 AND status = 'executing'
                       AND lease_expires_at > now()
                     ORDER BY id
                       FOR UPDATE SKIP LOCKED
                ), renewed AS (
                    UPDATE {instances} i
                       SET lease_expires_at = now() + $3 * interval '1 millisecond'
                      FROM held h
                     WHERE i.id = h.id
                    RETURNING i.id, i.cancel_requested
                )
                SELECT id, cancel_requested, true AS renewed FROM renewed
                 UNION ALL
                SELECT o.id, o.cancel_requested, false FROM owned o
                 WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.id = o.id)""");
        String releaseStatus = "CASE WHEN i.cancel_requested THEN 'cancelled' ELSE 'runnable' END";
        String releaseGuard = "i.id = r.id AND i.id = ANY ($1::bigint[]) AND i.attempt = r.attempt AND i.claimed_by = $2"
                + " AND " + ClaimStamp.matches("i", "r.claim_xid");
        this.release = tables.render("WITH r AS (SELECT * FROM unnest($1::bigint[], $3::int[], $4::bigint[])"
                + " AS r(id, attempt, claim_xid)), "
                + Settled.move("r", releaseGuard, releaseStatus, "i.step", "i.state", "i.result", "i.last_error",
                        "greatest(i.attempt - 1, 0)") + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = %s, claimed_by = NULL, lease_expires_at = NULL,
                           attempt = greatest(i.attempt - 1, 0), updated_at = now()
                      FROM r
                     WHERE %s AND NOT (%s)
                    RETURNING i.id, i.queue, i.status, i.type
                )
                SELECT id, queue, status, type FROM moved
                 UNION ALL
                SELECT id, queue, status, type FROM kept""".formatted(releaseStatus, releaseGuard,
                Settled.settlesWhere(releaseStatus)));
        String lapses = "lease_expires_at < now() + $1 * interval '1 millisecond'";
        this.sweepClaims = tables.render("""
                WITH due AS (
                    SELECT c.id, c.claim_xid, c.claimed_by, c.ids FROM {claims} c
                     WHERE CASE WHEN $2::text IS NULL THEN c.check_at < now() + $1 * interval '1 millisecond'
                                ELSE left(c.claimed_by, length($2)) = $2 AND c.claimed_by <> $3 END
                     ORDER BY c.check_at
                     LIMIT $4
                       FOR UPDATE SKIP LOCKED
                ), listed AS (
                    SELECT d.id AS claim, d.claim_xid, d.claimed_by, u.id FROM due d, unnest(d.ids) AS u(id)
                ), held AS (
                    SELECT l.claim, i.id, i.lease_expires_at
                      FROM {instances} i JOIN listed l ON l.id = i.id
                     WHERE i.id = ANY (ARRAY(SELECT id FROM listed)) AND i.status = 'executing'
                       AND i.claimed_by = l.claimed_by AND i.claim_xid IS NOT DISTINCT FROM l.claim_xid
                ), still AS (
                    SELECT claim, min(lease_expires_at) AS next_check FROM held GROUP BY claim
                ), ended AS (
                    DELETE FROM {claims} c USING due d
                     WHERE c.id = d.id AND d.id NOT IN (SELECT claim FROM still)
                ), later AS (
                    UPDATE {claims} c SET check_at = s.next_check FROM still s WHERE c.id = s.claim
                )
                SELECT (SELECT count(*) FROM due) AS claims,
                       ARRAY(SELECT id FROM held WHERE %s) AS lapsed""".formatted(lapses));
        this.lockLapsed = tables.render("""
                SELECT id, type, attempt FROM {instances}
                 WHERE id = ANY ($2::bigint[]) AND status = 'executing' AND %s
                   AND ($4::text IS NULL OR (left(claimed_by, length($4)) = $4 AND claimed_by <> $5))
                 ORDER BY lease_expires_at
                 LIMIT $3
                   FOR UPDATE SKIP LOCKED""".formatted(lapses));
        String reapStatus = "CASE WHEN i.cancel_requested THEN 'cancelled' WHEN i.attempt >= i.max_attempts"
                + " THEN 'failed' ELSE 'runnable' END";
        String reapError = "CASE WHEN i.cancel_requested THEN i.last_error ELSE 'worker ' || i.claimed_by"
                + " || ' lost: its lease expired on attempt ' || i.attempt || ' of ' || i.max_attempts END";
        String reapGuard = "i.id = l.id AND i.id = ANY ($1::bigint[]) AND i.claimed_by IS NOT NULL";
        this.recoverLocked = tables.render("WITH l AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS l(id, delay_ms)), "
                + Settled.move("l", reapGuard, reapStatus, "i.step", "i.state", "i.result", reapError, "i.attempt")
                + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = %s,
                           eligible_at = CASE WHEN i.cancel_requested OR i.attempt >= i.max_attempts THEN i.eligible_at
                                              ELSE now() + l.delay_ms * interval '1 millisecond' END,
                           last_error = %s,
                           claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
                      FROM l
                     WHERE %s AND NOT (%s)
                    RETURNING i.id, i.queue, i.status, i.type, i.parent_id
                )
                SELECT id, queue, status, type, parent_id FROM moved
                 UNION ALL
                SELECT id, queue, status, type, parent_id FROM kept""".formatted(reapStatus, reapError, reapGuard,
                Settled.settlesWhere(reapStatus)));
        this.wokenParents = tables.render("""
                SELECT id, queue, status, type FROM {instances}
                 WHERE id = ANY($1) AND status = 'runnable' AND children_pending <= 0""");
    }

    /**
     * A row the worker still holds, whether its cancel was requested, and whether this beat renewed
     * its lease (false: another transaction held it locked, so it was left to the next beat).
     */
    public record Renewed(long id, boolean cancelRequested, boolean renewed) {
    }

    /** Renews the leases; emits each row the worker still holds, renewed or left locked by another transaction. */
    public Flux<Renewed> heartbeat(Collection<Long> ids, String worker, long leaseMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(heartbeat)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).bind(2, leaseMillis).execute())
                .concatMap(result -> result.map(row -> new Renewed(row.get("id", Long.class),
                        Boolean.TRUE.equals(row.get("cancel_requested", Boolean.class)),
                        Boolean.TRUE.equals(row.get("renewed", Boolean.class))))));
    }

    /** Gives the worker's unstarted claims back; emits the rows it gave back. */
    public Flux<Transition> release(List<ClaimedRow> claims, String worker) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(release)
                        .bind(0, claims.stream().map(ClaimedRow::id).toArray(Long[]::new)).bind(1, worker)
                        .bind(2, claims.stream().map(ClaimedRow::attempt).toArray(Integer[]::new))
                        .bind(3, claims.stream().map(ClaimedRow::claimXid).toArray(Long[]::new)).execute())
                .concatMap(result -> result.map(Transition::read)));
    }

    /** How long a recovered claim waits before it runs again: the backoff of its type for the lost attempt. */
    @FunctionalInterface
    public interface RetryDelay {
        long millis(String type, int attempt);
    }

    /**
     * What one recovery did: the claims it recovered, the parents their settling woke, and how many
     * ledger rows it looked at (a full batch of them may have left more to look at).
     */
    public record Recovery(List<Transition> recovered, List<Transition> wokenParents, long claimsLookedAt) {

        private static final Recovery NONE = new Recovery(List.of(), List.of(), 0);

        private Recovery lookedAt(long claims) {
            return new Recovery(recovered, wokenParents, claims);
        }
    }

    private record Lost(long id, String type, int attempt) {
    }

    /** The sweep's answer: the ledger rows it looked at and the lapsed claims among theirs. */
    private record Swept(long claims, Long[] lapsed) {
    }

    /**
     * Recovers up to {@code limit} expired claims among those of up to {@code limit} due ledger rows,
     * in one transaction bounded by {@code timeout}: every worker's when {@code prefix} is null (the
     * reaper), else only those of {@code prefix}'s dead incarnations other than {@code self},
     * {@code marginMillis} before they expire.
     */
    public Mono<Recovery> recoverExpired(long marginMillis, @Nullable String prefix, String self, int limit,
            RetryDelay delay, Duration timeout) {
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .then(sweep(connection, marginMillis, prefix, self, limit))
                        .flatMap(swept -> (swept.lapsed().length == 0 ? Mono.just(List.<Lost>of())
                                        : lock(connection, marginMillis, prefix, self, swept.lapsed(), limit).collectList())
                                .flatMap(lost -> lost.isEmpty() ? Mono.just(Recovery.NONE) : settle(connection, lost, delay))
                                .map(recovery -> recovery.lookedAt(swept.claims()))))
                .single();
    }

    private Mono<Swept> sweep(Connection connection, long marginMillis, @Nullable String prefix, String self,
            int limit) {
        Statement statement = connection.createStatement(sweepClaims).bind(0, marginMillis);
        Db.bind(statement, 1, prefix, String.class);
        statement.bind(2, self).bind(3, limit);
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(row -> new Swept(row.get("claims", Long.class),
                        row.get("lapsed", Long[].class))))
                .single();
    }

    private Flux<Lost> lock(Connection connection, long marginMillis, @Nullable String prefix, String self,
            Long[] lapsed, int limit) {
        Statement statement = connection.createStatement(lockLapsed).bind(0, marginMillis).bind(1, lapsed)
                .bind(2, limit);
        Db.bind(statement, 3, prefix, String.class);
        return Flux.from(statement.bind(4, self).execute())
                .concatMap(result -> result.map(row -> new Lost(
                        row.get("id", Long.class), row.get("type", String.class), row.get("attempt", Integer.class))));
    }

    private Mono<Recovery> settle(Connection connection, List<Lost> lost, RetryDelay delay) {
        Long[] ids = new Long[lost.size()];
        Long[] delays = new Long[lost.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = lost.get(i).id();
            delays[i] = Math.max(0L, delay.millis(lost.get(i).type(), lost.get(i).attempt()));
        }
        List<Long> parents = new ArrayList<>();
        return Flux.from(connection.createStatement(recoverLocked).bind(0, ids).bind(1, delays).execute())
                .concatMap(result -> result.map(row -> {
                    Transition transition = Transition.read(row);
                    Long parent = row.get("parent_id", Long.class);
                    if (parent != null && transition.status().isTerminal()) {
                        parents.add(parent);
                    }
                    return transition;
                }))
                .collectList()
                .flatMap(recovered -> parents.isEmpty() ? Mono.just(new Recovery(recovered, List.of(), 0))
                        : Flux.from(connection.createStatement(wokenParents)
                                        .bind(0, parents.stream().distinct().toArray(Long[]::new)).execute())
                                .concatMap(result -> result.map(Transition::read))
                                .collectList()
                                .map(woken -> new Recovery(recovered, woken, 0)));
    }

}
