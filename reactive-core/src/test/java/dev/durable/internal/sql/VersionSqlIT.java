package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.internal.Db;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The guards of the versions' writes: nothing is migrated that changed since it was read or claimed. */
@ExtendWith(PostgresExtension.class)
class VersionSqlIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    private static long insert(TestDatabase db, String status, String claimedBy) {
        return Sql.query(db, "INSERT INTO {schema}.durable_instances (type, type_version, queue, step, state,"
                        + " max_attempts, status, claimed_by, attempt, lease_expires_at) VALUES ('wf', 1, 'q', 'old',"
                        + " '{\"a\": 1}', 5, $1, " + (claimedBy == null ? "NULL" : "'" + claimedBy + "'")
                        + ", 1, CASE WHEN $1 = 'executing' THEN now() + interval '1 minute' END) RETURNING id",
                row -> row.get(0, Long.class), status).get(0);
    }

    @Test
    void aRowChangedSinceItWasReadOrAClaimNoLongerHeldIsNotMigrated(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        VersionSql sql = new VersionSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));

        // Bulk: read, then one row is claimed and runs meanwhile, the other is left alone.
        long kept = insert(db, "runnable", null);
        long claimed = insert(db, "runnable", null);
        long executing = insert(db, "executing", "w1");
        List<VersionSql.Unmigrated> seen = sql.byIds(List.of(kept, claimed, executing)).collectList().block(WAIT);
        assertThat(seen).extracting(VersionSql.Unmigrated::id).containsExactly(kept, claimed);
        Sql.update(db, "UPDATE {schema}.durable_instances SET attempt = attempt + 1 WHERE id = $1", claimed);
        long written = sql.migrateSeen("wf", 2, seen.stream()
                .map(row -> new VersionSql.Migrated(row, "new", "{\"a\": 2}")).toList()).block(WAIT);
        assertThat(written).isEqualTo(1);
        assertThat(Sql.query(db, "SELECT id, type_version, step, state->>'a' FROM {schema}.durable_instances ORDER BY id",
                row -> row.get(0, Long.class) + " v" + row.get(1, Integer.class) + " " + row.get(2, String.class) + " "
                        + row.get(3, String.class)))
                .containsExactly(kept + " v2 new 2", claimed + " v1 old 1", executing + " v1 old 1");

        // Claim-time: only the worker holding the claim at that attempt and transaction, on the version it read.
        // A stamp past 32 bits, as a transaction id of a later epoch is.
        long stamp = (1L << 40) + 42;
        Sql.update(db, "UPDATE {schema}.durable_instances SET claim_xid = $2 WHERE id = $1", executing, stamp);
        assertThat(sql.migrateClaimed(executing, "w2", 1, stamp, 1, 2, "new", "{}").block(WAIT)).isFalse();
        assertThat(sql.migrateClaimed(executing, "w1", 2, stamp, 1, 2, "new", "{}").block(WAIT)).isFalse();
        assertThat(sql.migrateClaimed(executing, "w1", 1, stamp, 2, 3, "new", "{}").block(WAIT)).isFalse();
        assertThat(sql.migrateClaimed(executing, "w1", 1, stamp - 1, 1, 2, "new", "{}").block(WAIT)).isFalse();
        assertThat(sql.migrateClaimed(executing, "w1", 1, 0, 1, 2, "new", "{}").block(WAIT)).isFalse();
        assertThat(sql.migrateClaimed(executing, "w1", 1, stamp, 1, 2, "new", null).block(WAIT)).isTrue();

        // Failing a version: only rows still of it, never an executing one.
        long stranded = insert(db, "awaiting_signal", null);
        long other = insert(db, "executing", "w3");
        assertThat(sql.failVersion("wf", 1, "no path", 10).block(WAIT)).isEqualTo(2); // claimed and stranded
        assertThat(Sql.query(db, "SELECT status FROM {schema}.durable_instances_all WHERE id = $1",
                row -> row.get(0, String.class), other)).containsExactly("executing");
        assertThat(Sql.query(db, "SELECT status FROM {schema}.durable_instances_all WHERE id = $1",
                row -> row.get(0, String.class), stranded)).containsExactly("failed");
    }
}
