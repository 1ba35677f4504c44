package dev.durable.internal.sql;

import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Maintenance that is not about leases: await deadlines, the garbage collection of settled rows and
 * the sweep of idle rate-limit buckets. Each runner is one batch in one short transaction whose
 * statements are bounded by a statement timeout, so a stalled batch ends on the server too, not only
 * on the client.
 */
public final class MaintenanceSql {

    /**
     * Bounds the statements of the current transaction: {@code SET LOCAL statement_timeout} with a
     * bound parameter. Index: none. Locks: none.
     */
    private static final String STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', $1, true)";

    /**
     * Resumes up to $1 parked instances whose await deadline passed, with no awaited signal.
     * Index: the await-deadline index, earliest first. Locks: the resumed rows, skipping rows
     * another transaction holds (a delivery waking it, a cancel).
     */
    private final String expireAwaits;

    /**
     * Deletes up to $2 settled instances older than $1 ms from the history table, and up to $2
     * from the hot table (settled rows whose correlation key stays occupied; their signals go with
     * them: trigger durable_signals_forgotten), sparing children whose parent is still live: its join
     * reads them, and the recorded attempts, step inputs and fork links of both. Index: the history's
     * BRIN index on settlement time (no order: any old rows do), the hot table's GC index, oldest
     * first; the parents' primary key; the attempts by instance, the step inputs' and the forks'
     * primary keys (one probe each per deleted row; most instances have none: jobs never have step
     * inputs). Locks: the deleted rows, skipping rows another transaction holds.
     */
    private final String collectGarbage;

    /**
     * Deletes the signals whose instance is gone among the next $2 signals after id $1 (in id order).
     * There should be none: an instance's signals leave with it (trigger durable_signals_forgotten).
     * A delete with triggers off (session_replication_role = replica, a restore) leaves some, as did
     * the settle of version 1 when a delivery committed while it waited. A signal this statement sees
     * was delivered to a row that was live then, and the row is visible to this statement unless it
     * is gone since. Answers the last id it looked at (null past the last signal: the next sweep
     * starts over) and how many it deleted. Index: the signals' primary key (a range), the instances'
     * primary key (one probe per signal). Locks: the deleted signals.
     */
    private final String sweepOrphanSignals;

    /**
     * Deletes up to $2 minutes of the fleet's activity (durable_queue_minutes) older than $1 ms,
     * oldest first. Index: the minutes' primary key (minute first). Locks: the deleted rows, skipping
     * those a flush holds (its minute is the current one, never this old).
     */
    private final String collectMinutes;

    /**
     * Deletes up to $5 buckets of the rate limits this engine knows ($1-$3: name, tokens a second,
     * burst) that were already full again $4 ms ago. A missing bucket is created full by the next
     * pick that needs it, so deleting a full one changes no admission: the pick would have found
     * it full. The margin covers a pick whose transaction clock (now()) is older than the sweep's:
     * such a pick, bounded by its statement timeout, still finds the bucket full at its own now().
     * Buckets of limits this engine does not know are left to an engine that does. Index: none, a
     * scan of the buckets (one row per limit and partition that was used lately, which is what this
     * keeps small). Locks: the deleted buckets, skipping those a pick holds.
     */
    private final String sweepBuckets;

    /**
     * Deletes up to $1 sliding-window rows whose every slot is older than their ring by one slot more
     * (counted in the row's own slot length): such a row counts nothing, and a missing row is an
     * empty window, so deleting it changes no admission; the extra slot covers a taker whose clock
     * started before the sweep's. Index: none, a scan of the windows (one row per window and
     * partition used within about a window, which is what this keeps small). Locks: the deleted
     * rows, skipping those a taker holds.
     */
    private final String sweepWindows;

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
                RETURNING i.id, i.queue, i.status, i.type""");
        this.collectGarbage = tables.render("""
                WITH old AS (
                    SELECT h.id FROM {history} h
                     WHERE h.settled_at < now() - $1 * interval '1 millisecond'
                       AND (h.parent_id IS NULL OR NOT EXISTS (
                            SELECT 1 FROM {instances} p
                             WHERE p.id = h.parent_id AND p.status NOT IN ('done', 'failed', 'cancelled')))
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED
                ), archive AS (
                    DELETE FROM {history} h USING old o WHERE h.id = o.id RETURNING h.id
                ), doomed AS (
                    SELECT i.id FROM {instances} i
                     WHERE i.status IN ('done', 'failed', 'cancelled')
                       AND i.updated_at < now() - $1 * interval '1 millisecond'
                       AND (i.parent_id IS NULL OR NOT EXISTS (
                            SELECT 1 FROM {instances} p
                             WHERE p.id = i.parent_id AND p.status NOT IN ('done', 'failed', 'cancelled')))
                     ORDER BY i.updated_at
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED
                ), hot AS (
                    DELETE FROM {instances} i USING doomed d WHERE i.id = d.id RETURNING i.id
                ), attempts AS (
                    DELETE FROM {attempts} a WHERE a.instance_id = ANY (ARRAY(SELECT id FROM archive UNION ALL SELECT id FROM hot))
                ), inputs AS (
                    DELETE FROM {step_inputs} r WHERE r.instance_id = ANY (ARRAY(SELECT id FROM archive UNION ALL SELECT id FROM hot))
                ), forks AS (
                    DELETE FROM {forks} f WHERE f.id = ANY (ARRAY(SELECT id FROM archive UNION ALL SELECT id FROM hot))
                )
                SELECT (SELECT count(*) FROM archive) + (SELECT count(*) FROM hot)""");
        this.sweepOrphanSignals = tables.render("""
                WITH seen AS (
                    SELECT s.id, s.instance_id FROM {signals} s WHERE s.id > $1 ORDER BY s.id LIMIT $2
                ), orphaned AS (
                    DELETE FROM {signals} s USING seen o
                     WHERE s.id = o.id AND NOT EXISTS (SELECT 1 FROM {instances} i WHERE i.id = o.instance_id)
                    RETURNING s.id
                )
                SELECT (SELECT max(id) FROM seen) AS last_seen, (SELECT count(*) FROM orphaned) AS deleted""");
        this.collectMinutes = tables.render("""
                DELETE FROM {queue_minutes} m
                 USING (SELECT minute, queue FROM {queue_minutes}
                         WHERE minute < now() - $1 * interval '1 millisecond'
                         ORDER BY minute
                         LIMIT $2
                           FOR UPDATE SKIP LOCKED) o
                 WHERE m.minute = o.minute AND m.queue = o.queue""");
        this.sweepBuckets = tables.render("""
                WITH idle AS (
                    SELECT b.name, b.partition_key
                      FROM {buckets} b
                      JOIN unnest($1::text[], $2::float8[], $3::int[]) AS r(name, rate, burst) ON r.name = b.name
                     WHERE b.tokens + r.rate * extract(epoch FROM now() - $4 * interval '1 millisecond' - b.refilled_at)
                           >= r.burst
                     LIMIT $5
                       FOR UPDATE OF b SKIP LOCKED
                )
                DELETE FROM {buckets} b USING idle i
                 WHERE b.name = i.name AND b.partition_key = i.partition_key""");
        this.sweepWindows = tables.render("""
                WITH idle AS (
                    SELECT w.name, w.partition_key
                      FROM {windows} w
                     WHERE (SELECT max(s) FROM unnest(w.slots) s)
                           < floor(extract(epoch FROM now()) * 1000 / w.slot_millis)::bigint - {ring} - 1
                     LIMIT $1
                       FOR UPDATE OF w SKIP LOCKED
                )
                DELETE FROM {windows} w USING idle i
                 WHERE w.name = i.name AND w.partition_key = i.partition_key""")
                .replace("{ring}", Integer.toString(Limits.Window.SLOTS + 1));
    }

    /** Bounds every statement of the transaction on {@code connection} by {@code timeout}. */
    static Mono<Void> boundStatements(Connection connection, Duration timeout) {
        return Flux.from(connection.createStatement(STATEMENT_TIMEOUT)
                        .bind(0, Long.toString(Math.max(1, timeout.toMillis()))).execute())
                .concatMap(result -> result.map(row -> 1))
                .then();
    }

    /** Resumes up to {@code limit} parked instances whose await deadline passed; emits them once committed. */
    public Mono<List<Transition>> expireAwaits(int limit, Duration timeout) {
        return db.inTransaction(connection -> boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(expireAwaits).bind(0, limit).execute()))
                        .concatMap(result -> result.map(Transition::read)))
                .collectList();
    }

    /** Deletes up to {@code limit} settled instances older than the retention; emits how many. */
    public Mono<Long> collectGarbage(long retentionMillis, int limit, Duration timeout) {
        return db.inTransaction(connection -> boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(collectGarbage)
                                .bind(0, retentionMillis).bind(1, limit).execute()))
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .reduce(0L, Long::sum);
    }

    /** Deletes up to {@code limit} minutes of activity older than the retention; emits how many. */
    public Mono<Long> collectMinutes(long retentionMillis, int limit, Duration timeout) {
        return db.inTransaction(connection -> boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(collectMinutes)
                                .bind(0, retentionMillis).bind(1, limit).execute()))
                        .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }

    /** What a sweep of orphaned signals looked at and did. */
    public record OrphanSweep(@Nullable Long lastSeen, long deleted) {
    }

    /**
     * Deletes the orphaned signals among the {@code limit} signals after id {@code afterId}
     * ({@link #sweepOrphanSignals}).
     */
    public Mono<OrphanSweep> sweepOrphanSignals(long afterId, int limit, Duration timeout) {
        return db.inTransaction(connection -> boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(sweepOrphanSignals)
                                .bind(0, afterId).bind(1, limit).execute()))
                        .concatMap(result -> result.map(row -> new OrphanSweep(row.get(0, Long.class),
                                row.get(1, Long.class)))))
                .single();
    }

    /**
     * Deletes up to {@code limit} buckets of {@code rateLimits} that were full again {@code idleMillis}
     * ago; emits how many.
     */
    public Mono<Long> sweepBuckets(Collection<Limits.RateLimit> rateLimits, long idleMillis, int limit,
            Duration timeout) {
        if (rateLimits.isEmpty()) {
            return Mono.just(0L);
        }
        String[] names = rateLimits.stream().map(Limits.RateLimit::name).toArray(String[]::new);
        Double[] rates = rateLimits.stream().map(Limits.RateLimit::ratePerSecond).toArray(Double[]::new);
        Integer[] bursts = rateLimits.stream().map(Limits.RateLimit::burst).toArray(Integer[]::new);
        return db.inTransaction(connection -> boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(sweepBuckets).bind(0, names).bind(1, rates)
                                .bind(2, bursts).bind(3, idleMillis).bind(4, limit).execute()))
                        .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }

    /** Deletes up to {@code limit} sliding-window rows that count nothing any more; emits how many. */
    public Mono<Long> sweepWindows(int limit, Duration timeout) {
        return db.inTransaction(connection -> boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(sweepWindows).bind(0, limit).execute()))
                        .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }
}
