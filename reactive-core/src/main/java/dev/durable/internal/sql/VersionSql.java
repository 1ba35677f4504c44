package dev.durable.internal.sql;

import dev.durable.internal.Db;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Versioned workflows: writing a migrated state, step and version onto an instance of an older
 * version (claim-time and bulk), and failing on purpose the instances whose version has no
 * migration path. Nothing here is on the path of a row that needs no migration.
 */
public final class VersionSql {

    /**
     * Writes the migration of a claimed row: only while worker $2 still holds the claim of attempt
     * $3 and transaction $8 on it (status executing) and it is still of version $4. Index: primary
     * key. Locks: the row, which the claim owns (no other writer but a cancel or the reaper, which
     * the guard then loses to).
     */
    private final String migrateClaimed;

    /**
     * Writes migrated rows back, each only while it is exactly as read (same version, attempt, step
     * and state) and not executing: a row claimed, run or signalled meanwhile is skipped, never
     * overwritten with a migration of a state it no longer has. $1 the type, $2 the new version;
     * then per row: id, version, attempt, step and state as read, new step, new state.
     * Index: primary key. Locks: the rows it updates.
     */
    private final String migrateSeen;

    /**
     * Fails up to $4 live, not executing instances of type $1 still of version $2 with error $3
     * (moved to the history as any settled row): the explicit end of instances with no migration
     * path. Index: none for type and version (a rare, explicit call: a scan per batch). Locks: the
     * failed rows, skipping locked ones.
     */
    private final String failVersion;

    /**
     * The instances $1 as they are now, those runnable or parked: what a bulk migration chunk migrates.
     * Index: primary key. Locks: none (the write back is guarded by what was read).
     */
    private final String byIds;

    private final Db db;

    public VersionSql(Db db, Tables tables) {
        this.db = db;
        this.migrateClaimed = tables.render("""
                UPDATE {instances} i
                   SET type_version = $5, step = $6, state = $7::jsonb, updated_at = now()
                 WHERE i.id = $1 AND i.claimed_by = $2 AND i.attempt = $3 AND i.status = 'executing'
                   AND i.type_version = $4 AND %s""".formatted(ClaimStamp.matches("i", "$8")));
        this.byIds = tables.render("""
                SELECT id, type, type_version, attempt, step, state::text AS state FROM {instances}
                 WHERE id = ANY ($1::bigint[]) AND status IN ('runnable', 'awaiting_signal', 'awaiting_children')
                 ORDER BY id""");
        this.migrateSeen = tables.render("""
                UPDATE {instances} i
                   SET type_version = $2, step = u.new_step, state = u.new_state::jsonb, updated_at = now()
                  FROM unnest($3::bigint[], $4::int[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[])
                       AS u(id, type_version, attempt, step, state, new_step, new_state)
                 WHERE i.id = u.id AND i.id = ANY ($3::bigint[]) AND i.type = $1 AND i.type_version = u.type_version
                   AND i.attempt = u.attempt AND i.step = u.step AND i.state IS NOT DISTINCT FROM u.state::jsonb
                   AND i.status IN ('runnable', 'awaiting_signal', 'awaiting_children')""");
        this.failVersion = tables.render("""
                WITH doomed AS (
                    SELECT id FROM {instances}
                     WHERE type = $1 AND type_version = $2 AND status IN ('runnable', 'awaiting_signal', 'awaiting_children')
                     LIMIT $4
                       FOR UPDATE SKIP LOCKED
                ),\s""" + Settled.move("doomed d", "i.id = d.id", "'failed'", "i.step", "i.state", "i.result", "$3::text",
                        "i.attempt") + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = 'failed', last_error = $3, awaited_signals = NULL, await_deadline = NULL,
                           updated_at = now()
                      FROM doomed d
                     WHERE i.id = d.id AND NOT (%s)
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM moved) + (SELECT count(*) FROM kept)""".formatted(
                        Settled.settlesWhere("'failed'")));
    }

    /** Writes a claimed row's migration; emits whether the claim still held (else nothing was written). */
    public Mono<Boolean> migrateClaimed(long id, String worker, int attempt, long claimXid, int fromVersion,
            int toVersion, String step, @Nullable String stateJson) {
        return db.withConnection(connection -> Db.bind(connection.createStatement(migrateClaimed)
                                .bind(0, id).bind(1, worker).bind(2, attempt).bind(3, fromVersion).bind(4, toVersion)
                                .bind(5, step), 6, stateJson, String.class)
                        .bind(7, claimXid)
                        .execute())
                .concatMap(result -> Mono.from(result.getRowsUpdated()))
                .reduce(0L, Long::sum)
                .map(updated -> updated == 1);
    }

    /** An instance as the bulk migration read it. */
    public record Unmigrated(long id, String type, int typeVersion, int attempt, String step, @Nullable String stateJson) {
    }

    /** The instances {@code ids} that are runnable or parked, as they are now. */
    public Flux<Unmigrated> byIds(List<Long> ids) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(byIds)
                        .bind(0, ids.toArray(Long[]::new)).execute())
                .concatMap(result -> result.map(VersionSql::unmigrated)));
    }

    private static Unmigrated unmigrated(io.r2dbc.spi.Readable row) {
        return new Unmigrated(row.get("id", Long.class), row.get("type", String.class),
                row.get("type_version", Integer.class), row.get("attempt", Integer.class), row.get("step", String.class),
                row.get("state", String.class));
    }

    /** The same instance migrated: {@code step} and {@code stateJson} of the new version. */
    public record Migrated(Unmigrated seen, String step, @Nullable String stateJson) {
    }

    /** Writes back the rows still as read; emits how many. */
    public Mono<Long> migrateSeen(String type, int toVersion, List<Migrated> rows) {
        if (rows.isEmpty()) {
            return Mono.just(0L);
        }
        return db.withConnection(connection -> Flux.from(connection.createStatement(migrateSeen)
                        .bind(0, type).bind(1, toVersion)
                        .bind(2, rows.stream().map(row -> row.seen().id()).toArray(Long[]::new))
                        .bind(3, rows.stream().map(row -> row.seen().typeVersion()).toArray(Integer[]::new))
                        .bind(4, rows.stream().map(row -> row.seen().attempt()).toArray(Integer[]::new))
                        .bind(5, rows.stream().map(row -> row.seen().step()).toArray(String[]::new))
                        .bind(6, rows.stream().map(row -> row.seen().stateJson()).toArray(String[]::new))
                        .bind(7, rows.stream().map(Migrated::step).toArray(String[]::new))
                        .bind(8, rows.stream().map(Migrated::stateJson).toArray(String[]::new))
                        .execute())
                .concatMap(result -> Mono.from(result.getRowsUpdated())))
                .reduce(0L, Long::sum);
    }

    /** Fails one batch of the live, not executing instances of {@code type} at {@code version}; emits how many. */
    public Mono<Long> failVersion(String type, int version, String error, int batch) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(failVersion)
                        .bind(0, type).bind(1, version).bind(2, error).bind(3, batch).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .reduce(0L, Long::sum);
    }
}
