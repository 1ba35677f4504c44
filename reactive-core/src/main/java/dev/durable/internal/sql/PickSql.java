package dev.durable.internal.sql;

import static dev.durable.internal.sql.CandidateSql.CLAIM;
import static dev.durable.internal.sql.CandidateSql.NO_LIMITS;
import static dev.durable.internal.sql.CandidateSql.fill;
import static dev.durable.internal.sql.CandidateSql.plainSource;

import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.internal.sql.FairPickSql.FairShare;
import dev.durable.internal.sql.Rows.ClaimedRow;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The pick: how a scheduler claims the next rows of its queue with a lease, in one statement
 * composed of the candidate source every pick shares ({@link CandidateSql}), a fair queue's source and
 * key moves ({@link FairPickSql}) and, when the engine knows limits and admits them in the database,
 * the admission ({@link AdmissionSql}); this class runs the four statements that make ({@link #pick},
 * {@link #pickWithLimits}, and the fair ones) and reads what they claimed and held back. The pick of
 * an engine whose limiter is outside the database is {@link #locked()}. The queue's scheduler also
 * runs {@link #age} (priority aging) and stores a fair queue's shares ({@link #fair()}), each at most
 * every few seconds.
 */
public final class PickSql {

    /**
     * The pick of an engine that knows no limits, in one statement. Rows with a gate or rate limit
     * are left to engines that know them. Index: the pick index for candidates (an index-only
     * descent per distinct runnable priority, then each priority's due range), the executing-key
     * index for the key probe, the primary key for the claim. Locks: the claimed rows (skip locked).
     */
    private final String pick;

    /**
     * The pick of an engine that knows gates or rate limits (the PostgreSQL limiter), in one
     * statement: as {@link #pick}, and the limits are admitted in it, all or nothing
     * ({@link AdmissionSql}). $5-$7 are the gates (name, capacity, shards), $8-$10 the rate limits
     * (name, tokens a second, burst), $11-$12 the known types and their versions, $13-$15 the sliding
     * windows (name, slot length in ms, limit). The statement always returns one row more than it
     * claims or not, with the counts of what the limits held back.
     */
    private final String pickWithLimits;

    /**
     * Priority aging of queue $1: runnable rows due at least a step ($2 ms, database clock) ago whose
     * priority is above (less urgent than) $3 gain one level and spend one step of their wait (their
     * eligible time moves a step later, still in the past), at most $4 of them; returns how many. So
     * a row gains exactly one level per step it has waited, down to the floor, however often this
     * runs, and the pick index's order stays the pick's order (the entry moves with the new
     * priority; within its new level the row sorts by when it reached it).
     *
     * <p>When more rows are due for a step than one run lifts, the levels take turns: each level's
     * oldest row, least urgent level first, then each level's second oldest, and so on; so a large
     * backlog in one level delays no other level's aging, and which rows a run lifts is fixed by the
     * rows (priority, eligible time, id), not by the plan. Bounds: the levels are read without locks,
     * each at most $4 rows (fewer when there are more than eight levels: eight times $4 rows in all,
     * plus one descent per level), and only the rows chosen are then locked and rewritten, at most
     * $4, in id order.
     * Index: the pick index, one range per distinct priority above the floor (a recursive descent,
     * as the pick's), reading only rows due before the step; the primary key for the lock. Locks:
     * the aged rows (skip locked, so a pick in progress is never waited on).
     */
    private final String age;

    private final Db db;
    private final boolean limits;
    private final FairPickSql fairPicks;
    private final LockedPickSql locked;
    private final String[] gateNames;
    private final Integer[] gateCapacities;
    private final Integer[] gateShards;
    private final String[] rateNames;
    private final Double[] rates;
    private final Integer[] bursts;
    private final String[] windowNames;
    private final Long[] windowSlots;
    private final Integer[] windowLimits;
    private final String[] types;
    /** Per known type its current version, then per known type (same order) the lowest it runs. */
    private final Integer[] versions;

    /** The statements of an engine that knows these limits, and these types at these versions (and every older one). */
    public PickSql(Db db, Tables tables, Collection<Limits.Gate> gates, Collection<Limits.RateLimit> rateLimits,
            Map<String, Integer> knownTypes) {
        this(db, tables, gates, rateLimits, List.of(), knownTypes, Map.of());
    }

    /**
     * The statements of an engine that knows these limits (a row's rate slot names a token bucket or a
     * sliding window, admitted the same way: in urgency order, all or nothing with the row's gate), and
     * these types at these versions, each down to its lowest version in {@code lowestVersions} (1 when
     * absent).
     */
    public PickSql(Db db, Tables tables, Collection<Limits.Gate> gates, Collection<Limits.RateLimit> rateLimits,
            Collection<Limits.Window> windows, Map<String, Integer> knownTypes, Map<String, Integer> lowestVersions) {
        this.db = db;
        this.limits = !gates.isEmpty() || !rateLimits.isEmpty() || !windows.isEmpty();
        this.windowNames = windows.stream().map(Limits.Window::name).toArray(String[]::new);
        this.windowSlots = windows.stream().map(Limits.Window::slotMillis).toArray(Long[]::new);
        this.windowLimits = windows.stream().map(Limits.Window::limit).toArray(Integer[]::new);
        this.gateNames = gates.stream().map(Limits.Gate::name).toArray(String[]::new);
        this.gateCapacities = gates.stream().map(Limits.Gate::capacity).toArray(Integer[]::new);
        this.gateShards = gates.stream().map(Limits.Gate::shards).toArray(Integer[]::new);
        this.rateNames = rateLimits.stream().map(Limits.RateLimit::name).toArray(String[]::new);
        this.rates = rateLimits.stream().map(Limits.RateLimit::ratePerSecond).toArray(Double[]::new);
        this.bursts = rateLimits.stream().map(Limits.RateLimit::burst).toArray(Integer[]::new);
        this.types = knownTypes.keySet().toArray(String[]::new);
        this.versions = java.util.stream.Stream.concat(knownTypes.values().stream(),
                        knownTypes.keySet().stream().map(type -> lowestVersions.getOrDefault(type, 1)))
                .toArray(Integer[]::new);
        this.pick = tables.render("WITH RECURSIVE " + plainSource("$6", "$5", NO_LIMITS)
                + "\n" + fill(CLAIM, "claimed", "one_per_key") + ClaimColumns.SELECT);
        this.pickWithLimits = AdmissionSql.limited(tables, plainSource("$12", "$11", AdmissionSql.LIMITED_FILTER),
                "NULL::int", "");
        this.fairPicks = new FairPickSql(db, tables, limits);
        // A row's rate slot may name a rate limit or, by rateLimit(name), a sliding window.
        this.locked = new LockedPickSql(tables, gateNames, java.util.stream.Stream.concat(
                        rateLimits.stream().map(Limits.RateLimit::name), windows.stream().map(Limits.Window::name))
                .toArray(String[]::new), types, versions);
        this.age = tables.render("""
                WITH RECURSIVE levels AS (
                    SELECT (SELECT max(f.priority) FROM {instances} f
                             WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > $3) AS priority
                    UNION ALL
                    SELECT (SELECT max(f.priority) FROM {instances} f
                             WHERE f.queue = $1 AND f.status = 'runnable' AND NOT f.key_waiting AND f.priority > $3 AND f.priority < l.priority)
                      FROM levels l
                     WHERE l.priority IS NOT NULL
                ), share AS (
                    SELECT least($4, ceil($4 * 8.0 / greatest(count(*), 1)))::int AS rows
                      FROM levels WHERE priority IS NOT NULL
                ), due AS (
                    SELECT d.id, d.priority,
                           row_number() OVER (PARTITION BY d.priority ORDER BY d.eligible_at, d.id) AS turn
                      FROM levels l CROSS JOIN LATERAL (
                           SELECT i.id, i.priority, i.eligible_at FROM {instances} i
                            WHERE i.queue = $1 AND i.status = 'runnable' AND NOT i.key_waiting AND i.priority = l.priority
                              AND i.eligible_at <= now() - $2 * interval '1 millisecond'
                            ORDER BY i.eligible_at, i.id
                            LIMIT (SELECT rows FROM share)) d
                ), chosen AS (
                    SELECT id FROM due ORDER BY turn, priority DESC LIMIT $4
                ), aged AS (
                    SELECT i.id FROM {instances} i
                     WHERE i.id IN (SELECT id FROM chosen) AND i.status = 'runnable' AND i.priority > $3
                       AND i.eligible_at <= now() - $2 * interval '1 millisecond'
                     ORDER BY i.id
                       FOR UPDATE OF i SKIP LOCKED
                )
                UPDATE {instances} i SET priority = i.priority - 1,
                                         eligible_at = i.eligible_at + $2 * interval '1 millisecond'
                  FROM aged a
                 WHERE i.id = a.id AND i.status = 'runnable' AND i.priority > $3""");
    }

    /** The text of the pick of an engine without limits ($1-$4 as in a pick, $5-$6 the known types), for EXPLAIN. */
    public String pickText() {
        return pick;
    }

    /**
     * The text of the pick of an engine with limits ($1-$4 as in a pick, $5-$12 the limits and known
     * types as {@link #pickWithLimits} says), for EXPLAIN.
     */
    public String pickWithLimitsText() {
        return pickWithLimits;
    }

    /**
     * The text of a fair queue's pick ($1-$6 as {@link #pickText()}, $7-$9 the weights, $10 the keys to
     * step over), for EXPLAIN.
     */
    public String fairPickText() {
        return fairPicks.fairPickText();
    }

    /** The fair queues' part of the pick: its statements, and the shares their schedulers store. */
    public FairPickSql fair() {
        return fairPicks;
    }

    /** The pick of an engine whose limiter is outside the database. */
    public LockedPickSql locked() {
        return locked;
    }

    /** How many rows a limit held back in one pick, and one of them (its lowest id) with its type. */
    public record Throttled(long rows, long sampleId, @Nullable String sampleType) {

        static final Throttled NONE = new Throttled(0, 0, null);
    }

    /**
     * What one pick claimed, what full gates and empty buckets held back, and (a fair pick) the keys it
     * found foreign to this engine: due rows, none of a type and version it runs ({@link FairPickSql#FAIR_MOVES}),
     * and whether it walked a key whose cap was never asked for ({@link FairPickSql#FAIR_REPORT}).
     */
    public record Picked(List<ClaimedRow> rows, Throttled byGate, Throttled byRate, List<String> foreignKeys,
            boolean unasked) {

        public Picked(List<ClaimedRow> rows, Throttled byGate, Throttled byRate) {
            this(rows, byGate, byRate, List.of(), false);
        }
    }

    /**
     * Claims up to {@code limit} rows of {@code queue} for {@code worker} in one statement, admitting
     * limited rows in it when the engine knows limits ({@link #pickWithLimits}).
     */
    public Mono<Picked> pick(String queue, int limit, String worker, long leaseMillis) {
        return pick(queue, limit, worker, leaseMillis, null);
    }

    /** As {@link #pick(String, int, String, long)}; a fair queue's pick when {@code fair} is not null. */
    public Mono<Picked> pick(String queue, int limit, String worker, long leaseMillis, @Nullable FairShare fair) {
        return db.withConnection(connection -> pickCounting(connection, queue, limit, worker, leaseMillis, fair).flux())
                .single();
    }

    /** As {@link #pick(String, int, String, long)}, on the caller's connection (benchmarks roll it back). */
    public Flux<ClaimedRow> pick(Connection connection, String queue, int limit, String worker, long leaseMillis) {
        return pickCounting(connection, queue, limit, worker, leaseMillis, null).flatMapIterable(Picked::rows);
    }

    private Mono<Picked> pickCounting(Connection connection, String queue, int limit, String worker,
            long leaseMillis, @Nullable FairShare fair) {
        String text = fair == null ? (limits ? pickWithLimits : pick) : fairPicks.text(limits);
        Statement statement = connection.createStatement(text)
                .bind(0, queue).bind(1, limit).bind(2, worker).bind(3, leaseMillis);
        if (!limits && fair == null) {
            statement.bind(4, types).bind(5, versions);
            return Flux.from(statement.execute()).concatMap(result -> result.map(ClaimColumns::read)).collectList()
                    .map(rows -> new Picked(rows, Throttled.NONE, Throttled.NONE));
        }
        if (!limits) {
            statement.bind(4, types).bind(5, versions);
            bindFair(statement, 6, fair);
        } else {
            statement.bind(4, gateNames).bind(5, gateCapacities).bind(6, gateShards)
                    .bind(7, rateNames).bind(8, rates).bind(9, bursts).bind(10, types).bind(11, versions)
                    .bind(12, windowNames).bind(13, windowSlots).bind(14, windowLimits);
            bindFair(statement, 15, fair);
        }
        // Every row carries the counts (and a fair pick's foreign keys); a row that claims nothing only them.
        Throttled[] held = {Throttled.NONE, Throttled.NONE};
        java.util.concurrent.atomic.AtomicReference<List<String>> foreign =
                new java.util.concurrent.atomic.AtomicReference<>(List.of());
        boolean[] unasked = {false};
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(row -> {
                    if (limits) {
                        held[0] = throttled(row, "gate");
                        held[1] = throttled(row, "rate");
                    }
                    if (fair != null) {
                        String[] keys = row.get("foreign_keys", String[].class);
                        foreign.set(keys == null ? List.of() : List.of(keys));
                        unasked[0] = Boolean.TRUE.equals(row.get("unasked", Boolean.class));
                    }
                    return row.get("id", Long.class) == null ? Optional.<ClaimedRow>empty()
                            : Optional.of(ClaimColumns.read(row));
                }))
                .filter(Optional::isPresent).map(Optional::get)
                .collectList()
                .map(rows -> new Picked(rows, held[0], held[1], foreign.get(), unasked[0]));
    }

    /** Ages up to {@code batch} rows of {@code queue}; see {@link #age}. */
    public Mono<Long> age(String queue, long stepMillis, int floor, int batch) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(age)
                        .bind(0, queue).bind(1, stepMillis).bind(2, floor).bind(3, batch).execute())
                        .flatMap(result -> Mono.from(result.getRowsUpdated())))
                .reduce(0L, Long::sum);
    }

    private static void bindFair(Statement statement, int index, @Nullable FairShare fair) {
        if (fair != null) {
            statement.bind(index, fair.keys()).bind(index + 1, fair.weights()).bind(index + 2, fair.defaultWeight())
                    .bind(index + 3, fair.foreign());
            if (fair.unknownCap() == null) {
                statement.bindNull(index + 4, Integer.class);
            } else {
                statement.bind(index + 4, fair.unknownCap());
            }
        }
    }

    private static Throttled throttled(Readable row, String reason) {
        Long rows = row.get(reason + "_held", Long.class);
        if (rows == null || rows == 0) {
            return Throttled.NONE;
        }
        return new Throttled(rows, row.get(reason + "_sample_id", Long.class),
                row.get(reason + "_sample_type", String.class));
    }
}
