package dev.durable.internal.sql;

import dev.durable.LiveEngine;
import dev.durable.internal.Db;
import io.r2dbc.spi.Readable;
import java.time.Instant;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The registry of live engines, and the questions it answers about work nobody runs. */
public final class RegistrySql {

    private static final String ENGINE_COLUMNS = "origin, name, queues, types, versions, started_at, seen_at, lowest_versions";

    /**
     * Registers or refreshes this engine's entry with a TTL of $7 ms, drops entries long expired,
     * and returns every live entry (this one included). Index: the registry's primary key; the
     * table holds one row per engine. Locks: this engine's row; the expired rows it deletes.
     */
    private final String refresh;

    /** Removes this engine's entry as it closes. Index: primary key. Locks: the row. */
    private final String deregister;

    /** The live entries. Index: none (one row per engine). Locks: none. */
    private final String live;

    /**
     * The queues that have rows due now, one probe per queue: a loose scan of the pick index
     * (queue is its first column), each step finding the next queue after the last. Cost grows
     * with the number of queues, not rows. Index: the pick index. Locks: none.
     */
    private final String dueQueues;

    /**
     * Of the first $4 due rows at the head of queue $1 (pick order), those whose type at its version
     * no engine serving the queue runs ($2 the types, $3 the lowest version each runs, $5 the current one;
     * a type may come once per engine): counted by type and version, with the oldest due
     * time. Rows nobody can run are never picked, so they gather at the head: a sample of the head
     * finds them without reading the backlog. Index: the pick index. Locks: none.
     */
    private final String unknownTypes;

    /**
     * Fails up to $3 live (runnable or parked) instances of type $1 with error $2, moving them to
     * the history table ({@link Settled}); their parents count them off through the trigger. For removing a type for good. Index: none for the type
     * (a rare, explicit call: a scan per batch). Locks: the failed rows, skipping locked ones.
     */
    private final String failType;

    private final Db db;

    /** The paused queues (durable_queue_pauses). Index: none, a scan of a table of a few rows. Locks: none. */
    private final String pausedQueues;

    public RegistrySql(Db db, Tables tables) {
        this.db = db;
        this.refresh = tables.render("""
                WITH gone AS (
                    DELETE FROM {engines} WHERE expires_at < now() - interval '1 hour'
                ), mine AS (
                    INSERT INTO {engines} AS e (origin, name, queues, types, versions, expires_at, lowest_versions)
                    VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond', $7)
                    ON CONFLICT (origin) DO UPDATE
                       SET queues = EXCLUDED.queues, types = EXCLUDED.types, versions = EXCLUDED.versions,
                           lowest_versions = EXCLUDED.lowest_versions,
                           seen_at = now(), expires_at = EXCLUDED.expires_at
                    RETURNING\s""" + ENGINE_COLUMNS + """

                )
                SELECT\s""" + ENGINE_COLUMNS + " FROM mine\n UNION ALL\nSELECT " + ENGINE_COLUMNS
                + " FROM {engines} WHERE origin <> $1 AND expires_at > now()");
        this.pausedQueues = tables.render("SELECT queue FROM {queue_pauses}");
        this.deregister = tables.render("DELETE FROM {engines} WHERE origin = $1");
        this.live = tables.render("SELECT " + ENGINE_COLUMNS + " FROM {engines} WHERE expires_at > now() ORDER BY origin");
        this.dueQueues = tables.render("""
                WITH RECURSIVE due AS (
                    (SELECT queue FROM {instances}
                      WHERE status = 'runnable' AND NOT key_waiting AND eligible_at <= now() ORDER BY queue LIMIT 1)
                    UNION ALL
                    SELECT (SELECT i.queue FROM {instances} i
                             WHERE i.status = 'runnable' AND NOT i.key_waiting AND i.eligible_at <= now() AND i.queue > due.queue
                             ORDER BY i.queue LIMIT 1)
                      FROM due WHERE due.queue IS NOT NULL
                )
                SELECT queue FROM due WHERE queue IS NOT NULL""");
        this.unknownTypes = tables.render("""
                SELECT head.type, head.type_version, count(*) AS instances,
                       (extract(epoch FROM min(head.eligible_at)) * 1000000)::bigint AS oldest_micros
                  FROM (SELECT i.type, i.type_version, i.eligible_at FROM {instances} i
                         WHERE i.queue = $1 AND i.status = 'runnable' AND NOT i.key_waiting AND i.eligible_at <= now()
                         ORDER BY i.priority, i.eligible_at, i.id
                         LIMIT $4) head
                 WHERE NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::int[], $5::int[]) AS k(type, lowest, version)
                                    WHERE k.type = head.type AND head.type_version BETWEEN k.lowest AND k.version)
                 GROUP BY head.type, head.type_version
                 ORDER BY head.type, head.type_version""");
        this.failType = tables.render("""
                WITH doomed AS (
                    SELECT id FROM {instances}
                     WHERE type = $1 AND status IN ('runnable', 'awaiting_signal', 'awaiting_children')
                     LIMIT $3
                       FOR UPDATE SKIP LOCKED
                ),\s""" + Settled.move("doomed d", "i.id = d.id", "'failed'", "i.step", "i.state", "i.result", "$2::text",
                        "i.attempt") + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = 'failed', last_error = $2, await_deadline = NULL, updated_at = now()
                      FROM doomed d
                     WHERE i.id = d.id AND NOT (%s)
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM moved) + (SELECT count(*) FROM kept)""".formatted(
                        Settled.settlesWhere("'failed'")));
    }

    /** This engine's entry: what it serves, and for how long it counts as live without a refresh. */
    public record Entry(String origin, String name, List<String> queues, List<String> types, List<Integer> versions,
            List<Integer> lowestVersions, long ttlMillis) {
    }

    /** Registers or refreshes {@code entry}; emits every live engine. */
    public Flux<LiveEngine> refresh(Entry entry) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(refresh)
                        .bind(0, entry.origin()).bind(1, entry.name())
                        .bind(2, entry.queues().toArray(String[]::new))
                        .bind(3, entry.types().toArray(String[]::new))
                        .bind(4, entry.versions().toArray(Integer[]::new))
                        .bind(5, entry.ttlMillis())
                        .bind(6, entry.lowestVersions().toArray(Integer[]::new)).execute())
                .concatMap(result -> result.map(RegistrySql::toEngine)));
    }

    /** The queues paused now. */
    public Flux<String> pausedQueues() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(pausedQueues).execute())
                .concatMap(result -> result.map(row -> row.get(0, String.class))));
    }

    /**
     * The isolation level a transaction of the engine's connections starts in unless told otherwise:
     * the engine's statements are written for READ COMMITTED (each statement, and each statement of a
     * trigger's election, sees what committed before it).
     */
    public Mono<String> defaultIsolation() {
        return db.withConnection(connection -> Flux.from(connection
                        .createStatement("SELECT current_setting('default_transaction_isolation')").execute())
                .concatMap(result -> result.map(row -> row.get(0, String.class))))
                .next();
    }

    public Mono<Void> deregister(String origin) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(deregister).bind(0, origin)
                        .execute())
                .concatMap(result -> result.getRowsUpdated()))
                .then();
    }

    public Flux<LiveEngine> live() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(live).execute())
                .concatMap(result -> result.map(RegistrySql::toEngine)));
    }

    public Flux<String> dueQueues() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(dueQueues).execute())
                .concatMap(result -> result.map(row -> row.get(0, String.class))));
    }

    /** A count of rows no listed type/version covers, at the head of a queue. */
    public record UnknownType(String type, int typeVersion, long instances, Instant oldestEligibleAt) {
    }

    /** Per entry of {@code types}, the versions run: {@code lowest} to {@code versions}. */
    public Flux<UnknownType> unknownTypes(String queue, List<String> types, List<Integer> lowest, List<Integer> versions,
            int head) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(unknownTypes)
                        .bind(0, queue).bind(1, types.toArray(String[]::new))
                        .bind(2, lowest.toArray(Integer[]::new)).bind(3, head)
                        .bind(4, versions.toArray(Integer[]::new)).execute())
                .concatMap(result -> result.map(row -> {
                    long micros = row.get("oldest_micros", Long.class);
                    return new UnknownType(row.get("type", String.class), row.get("type_version", Integer.class),
                            row.get("instances", Long.class), Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L),
                                    Math.floorMod(micros, 1_000_000L) * 1000));
                })));
    }

    /** Fails one batch of live instances of {@code type}; emits how many. */
    public Mono<Long> failType(String type, String error, int batch) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(failType)
                        .bind(0, type).bind(1, error).bind(2, batch).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .reduce(0L, Long::sum);
    }

    private static LiveEngine toEngine(Readable row) {
        String[] types = row.get("types", String[].class);
        Integer[] versions = row.get("versions", Integer[].class);
        Integer[] lowest = row.get("lowest_versions", Integer[].class);
        Map<String, Integer> known = new LinkedHashMap<>();
        Map<String, Integer> lowestKnown = new LinkedHashMap<>();
        for (int i = 0; i < types.length; i++) {
            known.put(types[i], versions[i]);
            if (lowest != null && i < lowest.length && lowest[i] != null && lowest[i] > 1) {
                lowestKnown.put(types[i], lowest[i]);
            }
        }
        return new LiveEngine(row.get("origin", String.class), row.get("name", String.class),
                Arrays.asList(row.get("queues", String[].class)), known,
                row.get("started_at", Instant.class), row.get("seen_at", Instant.class), lowestKnown);
    }
}
