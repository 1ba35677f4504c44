package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.Transition;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Maintenance that is not about leases: await deadlines and the garbage collection of settled rows. */
public final class MaintenanceSql {

    /**
     * Resumes up to $1 parked instances whose await deadline passed, with no awaited signal.
     * Index: the await-deadline index, earliest first. Locks: the resumed rows, skipping rows
     * another transaction holds (a delivery waking it, a cancel).
     */
    private final String expireAwaits;

    /**
     * Deletes up to $2 settled instances older than $1 ms, with their signals, sparing children
     * whose parent is still live: its join reads them. Index: the GC index, oldest first; the
     * parent's primary key; the inbox by instance. Locks: the deleted rows, skipping rows another
     * transaction holds.
     */
    private final String collectGarbage;

    private final Db db;

    public MaintenanceSql(Db db, Tables tables) {
        this.db = db;
        this.expireAwaits = tables.render("""
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
        this.collectGarbage = tables.render("""
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
    }

    /** Resumes up to {@code limit} parked instances whose await deadline passed. */
    public Flux<Transition> expireAwaits(int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(expireAwaits)
                        .bind(0, limit).execute())
                .concatMap(result -> result.map(Transition::read)));
    }

    /** Deletes up to {@code limit} settled instances older than the retention; emits how many. */
    public Mono<Long> collectGarbage(long retentionMillis, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(collectGarbage)
                        .bind(0, retentionMillis).bind(1, limit).execute())
                .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }
}
