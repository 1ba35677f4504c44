package dev.durable.internal.sql;

import dev.durable.admin.QueueActivity;
import dev.durable.admin.QueueDepth;
import dev.durable.internal.Db;
import java.time.Duration;
import java.time.Instant;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What the fleet did and has waiting, per queue: the outcomes every engine counts per minute
 * (durable_queue_minutes) and the rows due now. The same on every engine and replica that reads it.
 */
public final class QueueActivitySql {

    /**
     * Adds one flush of an engine's counts ($1 queues; $2-$6 completed, failed, retried, cancelled,
     * reaped, parallel to them) to the rows of the database's current minute. The rows are written
     * in queue order, so two engines flushing at once wait on each other's rows in the same order and
     * never deadlock. Index: the primary key (the conflict target). Locks: this minute's rows of the
     * flushed queues, for the statement's instant.
     */
    private final String add;

    /**
     * The last $1 seconds in whole buckets of $2 seconds (a multiple of it), summed per bucket and
     * queue, oldest first: the buckets end with the one that holds now() and start on multiples of
     * $2 since the epoch; $3 one queue, or null for all. Index: the primary key, a range of minutes
     * over every queue (one queue is a filter on it: seven days of ten queues read 100,800 rows for
     * either). Locks: none.
     */
    private final String read;

    /**
     * Per queue, the rows due now (runnable, not waiting behind their key's head, eligible by now)
     * and the age of the oldest. Index: the pick index, read whole (rows scheduled ahead are read
     * and filtered: the count is of the index, not of a range): about 220 ms for a million due
     * rows (benchmarks/README.md, "The fleet's activity"). Locks: none.
     */
    private final String depths;

    private final Db db;

    public QueueActivitySql(Db db, Tables tables) {
        this.db = db;
        this.add = tables.render("""
                INSERT INTO {queue_minutes} AS m (minute, queue, completed, failed, retried, cancelled, reaped)
                SELECT date_trunc('minute', now()), u.queue, u.completed, u.failed, u.retried, u.cancelled, u.reaped
                  FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
                       AS u(queue, completed, failed, retried, cancelled, reaped)
                 ORDER BY u.queue
                ON CONFLICT (minute, queue) DO UPDATE
                   SET completed = m.completed + excluded.completed, failed = m.failed + excluded.failed,
                       retried = m.retried + excluded.retried, cancelled = m.cancelled + excluded.cancelled,
                       reaped = m.reaped + excluded.reaped""");
        this.read = tables.render("""
                SELECT to_timestamp(floor(extract(epoch FROM minute) / $2) * $2) AS bucket, queue,
                       sum(completed)::bigint, sum(failed)::bigint, sum(retried)::bigint, sum(cancelled)::bigint,
                       sum(reaped)::bigint
                  FROM {queue_minutes}
                 WHERE minute >= to_timestamp((floor(extract(epoch FROM now()) / $2) + 1) * $2 - $1)
                   AND ($3::text IS NULL OR queue = $3)
                 GROUP BY 1, 2
                 ORDER BY 1, 2""");
        this.depths = tables.render("""
                SELECT queue, count(*), min(eligible_at), now()
                  FROM {instances}
                 WHERE status = 'runnable' AND NOT key_waiting AND eligible_at <= now()
                 GROUP BY queue
                 ORDER BY queue""");
    }

    /** Adds counts to the current minute's rows; every array has one value per queue. */
    public Mono<Void> add(String[] queues, Long[] completed, Long[] failed, Long[] retried, Long[] cancelled,
            Long[] reaped) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(add)
                        .bind(0, queues).bind(1, completed).bind(2, failed).bind(3, retried).bind(4, cancelled)
                        .bind(5, reaped).execute())
                .concatMap(result -> result.getRowsUpdated()))
                .then();
    }

    /** The activity of the last {@code window} in buckets of {@code bucket} (which divides it), oldest first. */
    public Flux<QueueActivity> read(Duration window, Duration bucket, @Nullable String queue) {
        return db.withConnection(connection -> Flux.from(Db.bind(connection.createStatement(read)
                                .bind(0, window.toSeconds()).bind(1, bucket.toSeconds()), 2, queue, String.class)
                        .execute())
                .concatMap(result -> result.map(row -> new QueueActivity(row.get(0, Instant.class),
                        row.get(1, String.class), row.get(2, Long.class), row.get(3, Long.class), row.get(4, Long.class),
                        row.get(5, Long.class), row.get(6, Long.class)))));
    }

    /** Every queue with rows due now: how many, and since when the oldest has waited. */
    public Flux<QueueDepth> depths() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(depths).execute())
                .concatMap(result -> result.map(row -> {
                    Instant oldest = row.get(2, Instant.class);
                    Instant now = row.get(3, Instant.class);
                    return new QueueDepth(row.get(0, String.class), row.get(1, Long.class), oldest,
                            Duration.between(oldest, now).isNegative() ? Duration.ZERO : Duration.between(oldest, now));
                })));
    }
}
