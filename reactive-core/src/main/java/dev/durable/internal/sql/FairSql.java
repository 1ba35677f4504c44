package dev.durable.internal.sql;

import dev.durable.internal.Db;
import java.time.Duration;
import java.util.Collection;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The fair keys' repairs, for maintenance ({@code FairKeyHealer}): what the fair pick leaves for
 * later so that its own cost never grows with idle keys.
 */
public final class FairSql {

    /** One batch of {@link #heal}: the parked keys it looked at, those it woke, and the last one looked at. */
    public record Healed(long scanned, long woken, String lastQueue, String lastKey) {
    }

    /**
     * Wakes keys parked for good (inactive, no wake time) that hold a runnable row: a row inserted by
     * a transaction that was still open when the pick parked its key (the pick saw none) is found
     * here. Looks at up to $1 such keys after ($2, $3) in (queue, key) order; a woken key joins its
     * queue's virtual time as the activate trigger would. Index: the fair keys' parked index, an
     * EXISTS probe per key through the fair pick index. Locks: the keys it wakes (skip locked: a key
     * a pick or an insert holds is being moved already).
     */
    private final String heal;

    /**
     * Gives the empty key to up to $2 runnable keyless rows of the fair queues $1 (queued before
     * the queue was fair, or by an engine that does not run it fair: the fair pick reads keyed rows
     * only), and activates that key. Index: the pick index of each queue (status runnable). Locks:
     * the rows it keys (skip locked), the empty key's row of each queue.
     */
    private final String backfill;

    /**
     * Drops the per-key cap gate ('fairness.' || queue) from up to $2 unsettled, not executing rows
     * of queues $1, whose engine runs them without the cap (removed, or fairness turned off): no
     * engine would admit such a row any more; returns how many, and whether executing rows still
     * hold the gate (a retry would bring them back under it). Index: none that leads with the gate
     * (a scan, from engine start until no such row is left). Locks: the rows it changes (skip locked).
     */
    private final String uncap;

    private final Db db;

    public FairSql(Db db, Tables tables) {
        this.db = db;
        this.heal = tables.render("""
                WITH scanned AS MATERIALIZED (
                    SELECT k.queue, k.fairness_key FROM {fair_keys} k
                     WHERE NOT k.active AND k.wake_at IS NULL AND (k.queue, k.fairness_key) > ($2, $3)
                     ORDER BY k.queue, k.fairness_key
                     LIMIT $1
                ), stranded AS (
                    SELECT k.queue, k.fairness_key FROM {fair_keys} k
                     WHERE (k.queue, k.fairness_key) IN (SELECT queue, fairness_key FROM scanned)
                       AND NOT k.active AND k.wake_at IS NULL
                       AND EXISTS (SELECT 1 FROM {instances} r
                                    WHERE (r.queue || chr(31) || r.fairness_key) = (k.queue || chr(31) || k.fairness_key)
                                      AND r.fairness_key = k.fairness_key AND r.status = 'runnable' AND NOT r.key_waiting
                                      AND r.fairness_key IS NOT NULL)
                     ORDER BY k.queue, k.fairness_key
                       FOR UPDATE OF k SKIP LOCKED
                ), woken AS (
                    UPDATE {fair_keys} k
                       SET active = true,
                           pass = greatest(k.pass, COALESCE((SELECT min(a.pass) FROM {fair_keys} a
                                                              WHERE a.queue = k.queue AND a.active), k.pass))
                      FROM stranded s
                     WHERE k.queue = s.queue AND k.fairness_key = s.fairness_key
                    RETURNING 1
                ), last AS (
                    SELECT queue, fairness_key FROM scanned ORDER BY queue DESC, fairness_key DESC LIMIT 1
                )
                SELECT (SELECT count(*) FROM scanned), (SELECT count(*) FROM woken),
                       (SELECT queue FROM last), (SELECT fairness_key FROM last)""");
        this.backfill = tables.render("""
                WITH keyless AS (
                    SELECT i.id FROM {instances} i
                     WHERE i.queue = ANY ($1::text[]) AND i.status = 'runnable' AND i.fairness_key IS NULL
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED
                ), keyed AS (
                    UPDATE {instances} i SET fairness_key = ''
                      FROM keyless k
                     WHERE i.id = k.id
                    RETURNING i.queue
                ), activated AS (
                    INSERT INTO {fair_keys} AS k (queue, fairness_key, pass)
                    SELECT q.queue, '', COALESCE((SELECT min(a.pass) FROM {fair_keys} a
                                                   WHERE a.queue = q.queue AND a.active), 0)
                      FROM (SELECT DISTINCT queue FROM keyed) q
                     ORDER BY q.queue
                    ON CONFLICT (queue, fairness_key) DO UPDATE
                       SET active = true, wake_at = NULL, pass = greatest(k.pass, EXCLUDED.pass)
                     WHERE NOT k.active
                )
                SELECT count(*) FROM keyed""");
        this.uncap = tables.render("""
                WITH capped AS (
                    SELECT i.id FROM {instances} i
                     WHERE i.queue = ANY ($1::text[]) AND i.gate_name = 'fairness.' || i.queue
                       AND i.status <> 'executing'
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED
                ), uncapped AS (
                    UPDATE {instances} i SET gate_name = NULL, concurrency_key = NULL, gate_shard = NULL
                      FROM capped c
                     WHERE i.id = c.id AND i.status <> 'executing'
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM uncapped),
                       EXISTS (SELECT 1 FROM {instances} e
                                WHERE e.queue = ANY ($1::text[]) AND e.gate_name IS NOT NULL
                                  AND e.gate_name = 'fairness.' || e.queue AND e.status = 'executing')""");
    }

    /** One batch of waking stranded keys after ({@code queue}, {@code key}); see {@link #heal}. */
    public Mono<Healed> heal(int limit, String queue, String key, Duration timeout) {
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(heal).bind(0, limit).bind(1, queue)
                                .bind(2, key).execute()))
                        .concatMap(result -> result.map(row -> new Healed(row.get(0, Long.class),
                                row.get(1, Long.class), nonNull(row.get(2, String.class)),
                                nonNull(row.get(3, String.class))))))
                .single();
    }

    /** Keys up to {@code limit} keyless runnable rows of {@code fairQueues} with the empty key; emits how many. */
    public Mono<Long> backfill(Collection<String> fairQueues, int limit, Duration timeout) {
        if (fairQueues.isEmpty()) {
            return Mono.just(0L);
        }
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(backfill)
                                .bind(0, fairQueues.toArray(String[]::new)).bind(1, limit).execute()))
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .reduce(0L, Long::sum);
    }

    /** One batch of {@link #uncap}: the rows it changed, and whether executing rows still hold the cap gate. */
    public record Uncapped(long changed, boolean executing) {
    }

    /** Drops the cap gate from up to {@code limit} rows of {@code uncappedQueues}; see {@link #uncap}. */
    public Mono<Uncapped> uncap(Collection<String> uncappedQueues, int limit, Duration timeout) {
        if (uncappedQueues.isEmpty()) {
            return Mono.just(new Uncapped(0, false));
        }
        return db.inTransaction(connection -> MaintenanceSql.boundStatements(connection, timeout)
                        .thenMany(Flux.from(connection.createStatement(uncap)
                                .bind(0, uncappedQueues.toArray(String[]::new)).bind(1, limit).execute()))
                        .concatMap(result -> result.map(row -> new Uncapped(row.get(0, Long.class),
                                Boolean.TRUE.equals(row.get(1, Boolean.class))))))
                .single();
    }

    private static String nonNull(@org.jspecify.annotations.Nullable String value) {
        return value == null ? "" : value;
    }
}
