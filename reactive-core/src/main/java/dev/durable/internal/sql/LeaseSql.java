package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Statement;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Leases: the heartbeat that keeps claims, the release that gives them back, the recovery of expired ones. */
public final class LeaseSql {

    /**
     * Renews the leases of every row one worker holds, in one statement per tick, whatever the
     * buffer's depth, and says for each row it renewed whether a cancel was requested. A held row
     * it did not renew is no longer this worker's (reaped, released, settled). Index: primary key
     * (id = ANY). Locks: each renewed row, for the statement.
     */
    private final String heartbeat;

    /**
     * Gives claimed rows that never started back to runnable at once (graceful shutdown, a row
     * claimed twice by one worker, a cancelled row in the buffer), undoing the attempt their claim
     * took; a row whose cancel was requested ends cancelled. Guarded by worker and by the attempt
     * each claim took, so an old claim never gives back a newer one. Index: primary key. Locks:
     * each released row.
     */
    private final String release;

    /**
     * Returns expired claims to runnable, or to failed once their attempts are spent, or to
     * cancelled when a cancel was requested. The reaper passes no prefix and a zero margin; the
     * startup reclaim passes its dead predecessors' identity prefix and a margin, so it takes their
     * rows before the lease runs out but never a live owner's freshly beaten one. Bounded per
     * statement. Index: the lease index, oldest lease first. Locks: the recovered rows, skipping
     * rows another transaction holds (left for the next tick).
     */
    private final String recoverExpired;

    private final Db db;

    public LeaseSql(Db db, Tables tables) {
        this.db = db;
        this.heartbeat = tables.render("""
                UPDATE {instances}
                   SET lease_expires_at = now() + $3 * interval '1 millisecond'
                 WHERE id = ANY($1) AND claimed_by = $2 AND status = 'executing'
                RETURNING id, cancel_requested""");
        this.release = tables.render("""
                UPDATE {instances} i
                   SET status = CASE WHEN i.cancel_requested THEN 'cancelled' ELSE 'runnable' END,
                       claimed_by = NULL, lease_expires_at = NULL,
                       attempt = greatest(i.attempt - 1, 0), updated_at = now()
                  FROM unnest($1::bigint[], $3::int[]) AS r(id, attempt)
                 WHERE i.id = r.id AND i.attempt = r.attempt AND i.claimed_by = $2 AND i.status = 'executing'
                RETURNING i.id, i.queue, i.status""");
        this.recoverExpired = tables.render("""
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
    }

    /** A row the heartbeat renewed, and whether its cancel was requested. */
    public record Renewed(long id, boolean cancelRequested) {
    }

    /** Renews the leases; emits each row the worker still holds. */
    public Flux<Renewed> heartbeat(Collection<Long> ids, String worker, long leaseMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(heartbeat)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).bind(2, leaseMillis).execute())
                .concatMap(result -> result.map(row -> new Renewed(row.get("id", Long.class),
                        Boolean.TRUE.equals(row.get("cancel_requested", Boolean.class))))));
    }

    /** Gives the worker's unstarted claims back; emits the rows it gave back. */
    public Flux<Transition> release(List<ClaimedRow> claims, String worker) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(release)
                        .bind(0, claims.stream().map(ClaimedRow::id).toArray(Long[]::new)).bind(1, worker)
                        .bind(2, claims.stream().map(ClaimedRow::attempt).toArray(Integer[]::new)).execute())
                .concatMap(result -> result.map(Transition::read)));
    }

    /**
     * Recovers expired claims: every worker's when {@code prefix} is null (the reaper), else only
     * those of {@code prefix}'s dead incarnations other than {@code self}, {@code marginMillis}
     * before they expire.
     */
    public Flux<Transition> recoverExpired(long marginMillis, @Nullable String prefix, String self, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(recoverExpired).bind(0, marginMillis);
            Db.bind(statement, 1, prefix, String.class);
            statement.bind(2, self).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(Transition::read));
        });
    }

}
