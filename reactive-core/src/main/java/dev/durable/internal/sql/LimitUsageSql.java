package dev.durable.internal.sql;

import dev.durable.Limits;
import dev.durable.admin.GateUsage;
import dev.durable.admin.RateBucket;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import java.time.Instant;
import java.util.Collection;
import reactor.core.publisher.Flux;

/**
 * The admin's view of the limits: gate claims per key (from the rows and the permits, for every
 * limiter) and the PostgreSQL limiter's token buckets and sliding windows. Locks: none.
 */
public final class LimitUsageSql {

    private final Db db;

    /**
     * Live gate claims per (gate, key), busiest first, with the capacity of the gates configured here
     * ($1 names, $2 capacities; $3 the most keys). Counted from the rows, not the limiter's counters, so
     * it answers for every limiter, and a lapsed lease (a dead worker's row the reaper has not reached)
     * holds nothing; plus the slots of live permits the PostgreSQL limiter granted outside jobs
     * (durable_limit_permits, a few rows). Index: durable_instances_gated_executing_idx, the partial
     * index of executing rows of a gate (a full walk of it: they are bounded by the engines'
     * concurrency), then a top-N sort of the groups. Locks: none.
     */
    private final String gateUsage;

    /**
     * The PostgreSQL limiter's token buckets with their tokens refilled to now as the pick refills them
     * ({@link AdmissionSql#REFILLED}) for the limits configured here ($1 names, $2 rates, $3 bursts; a bucket
     * of another limit shows its stored tokens), emptiest first; $4 the most rows. Index: a scan of
     * durable_rate_buckets (kept small: the bucket sweeper deletes buckets full again) and a top-N sort.
     * Locks: none (a pick updating a bucket meanwhile is not waited for: the stored row is read).
     */
    private final String buckets;

    /**
     * The PostgreSQL limiter's sliding windows, per partition what their live slots counted (each row's
     * own slot length), with the limits configured here ($1 names, $2 limits), fullest first; $3 the most
     * rows. Index: a scan of durable_window_counters (the bucket sweeper deletes idle ones) and a top-N
     * sort. Locks: none.
     */
    private final String windows;

    public LimitUsageSql(Db db, Tables tables) {
        this.db = db;
        this.gateUsage = tables.render("""
                SELECT u.gate_name, u.concurrency_key, u.held, g.capacity
                  FROM (SELECT gate_name, concurrency_key, sum(slots)::bigint AS held
                          FROM (SELECT gate_name, concurrency_key, 1 AS slots
                                  FROM {instances}
                                 WHERE status = 'executing' AND gate_name IS NOT NULL AND lease_expires_at > now()
                                UNION ALL
                                SELECT gate, key, slots FROM {permits} WHERE expires_at > now()) claims
                         GROUP BY gate_name, concurrency_key) u
                  LEFT JOIN unnest($1::text[], $2::int[]) AS g(name, capacity) ON g.name = u.gate_name
                 ORDER BY u.held DESC, u.gate_name, u.concurrency_key
                 LIMIT $3""");
        this.buckets = tables.render("""
                SELECT * FROM (
                    SELECT b.name, b.partition_key, b.refilled_at, r.burst,
                           CASE WHEN r.name IS NULL THEN b.tokens ELSE {refilled} END AS tokens
                      FROM {buckets} b
                      LEFT JOIN unnest($1::text[], $2::float8[], $3::int[]) AS r(name, rate, burst) ON r.name = b.name
                ) t
                 ORDER BY t.burst IS NULL, t.tokens / t.burst, t.name, t.partition_key
                 LIMIT $4""").replace("{refilled}", AdmissionSql.REFILLED.formatted("r.burst", "r.rate"));
        this.windows = tables.render("""
                SELECT * FROM (
                    SELECT w.name, w.partition_key, x.lim,
                           (SELECT coalesce(sum(u.c), 0) FROM unnest(w.slots, w.counts) AS u(s, c)
                             WHERE u.s > floor(extract(epoch FROM now()) * 1000 / w.slot_millis)::bigint - {ring})::int
                               AS used
                      FROM {windows} w
                      LEFT JOIN unnest($1::text[], $2::int[]) AS x(name, lim) ON x.name = w.name
                ) t
                 ORDER BY t.used DESC, t.name, t.partition_key
                 LIMIT $3""").replace("{ring}", Integer.toString(Limits.Window.SLOTS + 1));
    }

    /** {@link #gateUsage}: at most {@code limit} keys, with the capacities of {@code gates}. */
    public Flux<GateUsage> gateUsage(Collection<Limits.Gate> gates, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(gateUsage)
                        .bind(0, gates.stream().map(Limits.Gate::name).toArray(String[]::new))
                        .bind(1, gates.stream().map(Limits.Gate::capacity).toArray(Integer[]::new))
                        .bind(2, limit)
                        .execute())
                .concatMap(result -> result.map(row -> {
                    String key = row.get("concurrency_key", String.class);
                    return new GateUsage(row.get("gate_name", String.class), key == null ? "" : key,
                            row.get("held", Long.class), row.get("capacity", Integer.class));
                })))
                .onErrorMap(Errors::translate);
    }

    /** {@link #buckets}: at most {@code limit}, refilled by the rates of {@code rates}. */
    public Flux<RateBucket> buckets(Collection<Limits.RateLimit> rates, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(buckets)
                        .bind(0, rates.stream().map(Limits.RateLimit::name).toArray(String[]::new))
                        .bind(1, rates.stream().map(Limits.RateLimit::ratePerSecond).toArray(Double[]::new))
                        .bind(2, rates.stream().map(Limits.RateLimit::burst).toArray(Integer[]::new))
                        .bind(3, limit)
                        .execute())
                .concatMap(result -> result.map(row -> new RateBucket(row.get("name", String.class),
                        row.get("partition_key", String.class), row.get("tokens", Double.class),
                        row.get("burst", Integer.class), row.get("refilled_at", Instant.class)))))
                .onErrorMap(Errors::translate);
    }

    /** {@link #windows}: at most {@code limit} partitions, with the limits of {@code windows}. */
    public Flux<dev.durable.admin.WindowUsage> windows(Collection<Limits.Window> windows, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(this.windows)
                        .bind(0, windows.stream().map(Limits.Window::name).toArray(String[]::new))
                        .bind(1, windows.stream().map(Limits.Window::limit).toArray(Integer[]::new))
                        .bind(2, limit)
                        .execute())
                .concatMap(result -> result.map(row -> new dev.durable.admin.WindowUsage(row.get("name", String.class),
                        row.get("partition_key", String.class), row.get("used", Integer.class),
                        row.get("lim", Integer.class)))))
                .onErrorMap(Errors::translate);
    }
}
