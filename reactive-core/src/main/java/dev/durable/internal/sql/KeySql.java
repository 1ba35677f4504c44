package dev.durable.internal.sql;

import dev.durable.internal.Db;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The repair of ungated concurrency keys left without a head (key_waiting), for maintenance
 * ({@code SkippedKeyElections}, {@code KeyHealer}). Every path that changes a keyed row elects its
 * key's head in its own transaction, but an election may give up waiting for the key's lock
 * (durable_key_skips keeps the key), and one that runs on an older snapshot (a transaction in
 * REPEATABLE READ or SERIALIZABLE) may not see a row that committed waiting after the snapshot was
 * taken; either leaves the key's rows waiting behind no head until the key's next event, which a
 * quiet key never has.
 */
public final class KeySql {

    /** The advisory lock class of a key's election ('KEYW', durable_key_elect; the object: the key's hashtext). */
    private static final int KEY_LOCK_CLASS = 1262836055;

    /**
     * One batch of {@link #heal}: the waiting keys it looked at, those it elected a head for, the last
     * one looked at, and the queues of the elected heads.
     */
    public record Healed(long scanned, long elected, String lastKey, List<String> queues) {
    }

    /** What the heal statement reports: as {@link Healed}, with the elected keys. */
    private record Batch(long scanned, long elected, String lastKey, List<String> keys) {
    }

    /**
     * Bounds the batch's statements, and its waits for row locks below the server's deadlock check:
     * an election waits for a row another transaction holds, which may be waiting for the key's
     * lock this batch holds; the batch then gives up (the next pass tries again), not the other.
     */
    private static final String BOUNDS = "SELECT set_config('statement_timeout', $1, true),"
            + " set_config('lock_timeout', $2, true)";

    /** The most a batch waits for one row lock: well under deadlock_timeout's default second. */
    private static final String LOCK_TIMEOUT_MILLIS = "200";

    /**
     * Walks up to $1 distinct keys that have waiting rows, in key order from $2 (exclusive after the
     * first batch), and has those with no head (no runnable head, no executing row) elect one with
     * durable_key_elect, the election the triggers run, so the rules live in one place. A key whose
     * election lock another transaction holds is skipped (that transaction is electing it, and the
     * next pass looks again): a try never waits, so election locks never deadlock here. Index: the key-waiting index, one
     * descent per key (a loose index scan: a key's many waiting rows cost nothing more); the key-head
     * index, one probe per key. Locks: the elected keys' election locks (try), the rows the elections
     * flip. Read committed (forced): each election statement reads what committed before it.
     */
    private final String healFirst;
    private final String healAfter;

    /**
     * Elects the keys whose election gave up waiting for the key's lock (durable_key_elect writes them
     * down in durable_key_skips): the first $1 entries, in order, of keys whose lock is free now (a
     * held key is stepped over, so it never holds back the keys listed after it), then strikes those
     * entries off; a held key stays for the next pass. Index: durable_key_skips' primary key;
     * the elections'. Locks: the entries (SKIP LOCKED: engines share the list), the keys' election
     * locks (try), the rows the elections flip.
     */
    private final String retrySkipped;

    /** The queues of the heads just elected for $1 (to poke them). Index: the key-head index. Locks: none. */
    private final String headQueues;

    private final Db db;

    public KeySql(Db db, Tables tables) {
        this.db = db;
        String elect = tables.table("durable_key_elect");
        this.healFirst = tables.render(heal(">=", elect));
        this.healAfter = tables.render(heal(">", elect));
        this.retrySkipped = tables.render("""
                WITH due AS MATERIALIZED (
                    SELECT s.id, s.concurrency_key AS k FROM %1$s s
                     WHERE pg_try_advisory_xact_lock(%3$d, hashtext(s.concurrency_key))
                     ORDER BY s.id LIMIT $1 FOR UPDATE SKIP LOCKED
                ), elected AS MATERIALIZED (
                    SELECT l.k, %2$s(l.k) FROM (SELECT DISTINCT k FROM due) l ORDER BY l.k
                ), struck AS (
                    DELETE FROM %1$s s USING due d WHERE s.id = d.id
                )
                SELECT (SELECT count(*) FROM due), (SELECT count(*) FROM elected), '',
                       (SELECT array_agg(k) FROM elected)""".formatted(tables.table("durable_key_skips"), elect,
                KEY_LOCK_CLASS));
        this.headQueues = tables.render("""
                SELECT DISTINCT h.queue FROM {instances} h
                 WHERE h.concurrency_key = ANY ($1::text[]) AND NOT h.key_waiting AND h.status = 'runnable'
                   AND h.concurrency_key IS NOT NULL AND h.gate_name IS NULL""");
    }

    private static String heal(String after, String elect) {
        return """
                WITH RECURSIVE walk AS (
                    SELECT (SELECT min(w.concurrency_key) FROM {instances} w
                             WHERE w.key_waiting AND w.concurrency_key %1$s $2) AS k, 1 AS n
                  UNION ALL
                    SELECT (SELECT min(w.concurrency_key) FROM {instances} w
                             WHERE w.key_waiting AND w.concurrency_key > walk.k), walk.n + 1
                      FROM walk
                     WHERE walk.k IS NOT NULL AND walk.n < $1
                ), scanned AS MATERIALIZED (
                    SELECT k FROM walk WHERE k IS NOT NULL
                ), headless AS MATERIALIZED (
                    SELECT s.k FROM scanned s
                     WHERE NOT EXISTS (SELECT 1 FROM {instances} h
                                        WHERE h.concurrency_key = s.k AND NOT h.key_waiting
                                          AND h.status IN ('runnable', 'executing') AND h.gate_name IS NULL)
                ), locked AS MATERIALIZED (
                    SELECT h.k FROM headless h WHERE pg_try_advisory_xact_lock(%3$d, hashtext(h.k))
                ), elected AS MATERIALIZED (
                    SELECT l.k, %2$s(l.k) FROM locked l ORDER BY l.k
                )
                SELECT (SELECT count(*) FROM scanned), (SELECT count(*) FROM elected),
                       (SELECT max(k) FROM scanned), (SELECT array_agg(k) FROM elected)""".formatted(after, elect, KEY_LOCK_CLASS);
    }

    /**
     * One batch of electing heads for keys left without one, after {@code key} ({@code first}: from
     * the first key on); the queues of the elected heads come back to be poked once it committed.
     */
    public Mono<Healed> heal(int limit, String key, boolean first, Duration timeout) {
        return electing(timeout, connection -> connection.createStatement(first ? healFirst : healAfter)
                .bind(0, limit).bind(1, key));
    }

    /**
     * One batch of electing keys whose election gave up on a held lock ({@link #retrySkipped}): the
     * keys it looked at, those it elected, and the queues of the new heads.
     */
    public Mono<Healed> retrySkipped(int limit, Duration timeout) {
        return electing(timeout, connection -> connection.createStatement(retrySkipped).bind(0, limit));
    }

    /**
     * Runs an electing statement (answering looked at, elected, last key, elected keys) in a READ
     * COMMITTED transaction bounded by {@code timeout}, then reads the queues of the new heads.
     */
    private Mono<Healed> electing(Duration timeout, Function<Connection, Statement> statement) {
        return db.inTransaction(IsolationLevel.READ_COMMITTED, connection -> Flux.from(connection
                                .createStatement(BOUNDS)
                                .bind(0, Long.toString(Math.max(1, timeout.toMillis())))
                                .bind(1, LOCK_TIMEOUT_MILLIS).execute())
                        .concatMap(result -> result.map(row -> 1))
                        .thenMany(Flux.from(statement.apply(connection).execute()))
                        .concatMap(result -> result.map(row -> new Batch(row.get(0, Long.class),
                                row.get(1, Long.class), nonNull(row.get(2, String.class)),
                                keys(row.get(3, String[].class)))))
                        // The batch's result is read to its end before the next statement goes out.
                        .collectList()
                        .map(batches -> batches.get(0))
                        .flatMapMany(batch -> (batch.keys().isEmpty() ? Mono.just(List.<String>of())
                                : Flux.from(connection.createStatement(headQueues)
                                                .bind(0, batch.keys().toArray(String[]::new)).execute())
                                        .concatMap(result -> result.map(row -> nonNull(row.get(0, String.class))))
                                        .collectList())
                                .map(queues -> new Healed(batch.scanned(), batch.elected(), batch.lastKey(),
                                        queues))))
                .single();
    }

    private static List<String> keys(String @Nullable [] keys) {
        return keys == null ? List.of() : List.of(keys);
    }

    private static String nonNull(@Nullable String value) {
        return value == null ? "" : value;
    }
}
