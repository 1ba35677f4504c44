package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.internal.Db;
import dev.durable.internal.sql.LeaseSql.Recovery;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The ledger of claims (schema version 6): every statement that makes rows executing (or moves a
 * lease earlier) records them, whoever sends it, and nothing else does; the reaper's sweep finds lapsed claims through it and
 * forgets a ledger row once none of its claims is still executing under it.
 */
@ExtendWith(PostgresExtension.class)
class ClaimLedgerIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    /** The schema, empty (the class's tests share it). */
    private static void migrate(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        Sql.update(db, "TRUNCATE {schema}.durable_instances, {schema}.durable_claims");
    }

    /** The ledger as "stamp worker ids", in the order the rows were recorded ('-' for no stamp). */
    private static List<String> ledger(TestDatabase db) {
        return Sql.query(db, "SELECT CASE WHEN claim_xid IS NULL THEN '-' ELSE 'stamped' END || ' ' || claimed_by"
                + " || ' ' || (SELECT array_agg(i ORDER BY i) FROM unnest(ids) i)::text FROM {schema}.durable_claims ORDER BY id",
                row -> row.get(0, String.class));
    }

    private static List<Long> runnable(TestDatabase db, int rows) {
        return Sql.query(db, "INSERT INTO {schema}.durable_instances (type, queue, step, max_attempts)"
                + " SELECT 't', 'q', 'run', 5 FROM generate_series(1, $1) RETURNING id", row -> row.get(0, Long.class), rows);
    }

    /** Claims the rows in one statement, as a pick does: stamped, leased for {@code leaseSeconds}. */
    private static void claim(TestDatabase db, String worker, int leaseSeconds, long... ids) {
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = $1, attempt = attempt + 1,"
                + " lease_expires_at = now() + $2 * interval '1 second', updated_at = now(),"
                + " claim_xid = pg_current_xact_id()::text::bigint WHERE id = ANY ($3)", worker, leaseSeconds,
                Arrays.stream(ids).boxed().toArray(Long[]::new));
    }

    @Test
    void everyStatementThatMakesRowsExecutingIsRecordedOnceAndNoOtherIs(TestDatabase db) {
        migrate(db);
        List<Long> ids = runnable(db, 4);

        // A pick: one ledger row for the statement, whatever the number of rows.
        claim(db, "w1", 60, ids.get(0), ids.get(1), ids.get(2));
        assertThat(ledger(db)).containsExactly("stamped w1 {%d,%d,%d}".formatted(ids.get(0), ids.get(1), ids.get(2)));

        // What is not a claim records nothing: a heartbeat, a commit that keeps the claim for the next
        // step, an admin's change to a runnable row, a release.
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() + interval '2 minutes'"
                + " WHERE status = 'executing'");
        Sql.update(db, "UPDATE {schema}.durable_instances SET step = 'next', attempt = 0, updated_at = now() WHERE id = $1",
                ids.get(0));
        Sql.update(db, "UPDATE {schema}.durable_instances SET priority = 3 WHERE id = $1", ids.get(3));
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'runnable', claimed_by = NULL, lease_expires_at = NULL"
                + " WHERE id = $1", ids.get(2));
        assertThat(ledger(db)).hasSize(1);

        // A claim that records no transaction, as an engine of version 4 makes: recorded with the stamp the row
        // kept from its last claim (so its ledger row tells it apart from nothing and matches what the row says).
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'old-engine',"
                + " attempt = attempt + 1, lease_expires_at = now() + interval '1 minute' WHERE id = $1", ids.get(2));
        // Rows inserted already claimed (an idle engine's claim-on-insert): each recorded alone, with no stamp; the
        // unclaimed row beside them in the same statement is not recorded.
        List<Long> inserted = Sql.query(db, "INSERT INTO {schema}.durable_instances (type, queue, step, max_attempts,"
                + " status, claimed_by, attempt, lease_expires_at) VALUES ('t', 'q', 'run', 5, 'executing', 'w2', 1,"
                + " now() + interval '1 minute'), ('t', 'q', 'run', 5, 'executing', 'w2', 1, now() + interval '1 minute'),"
                + " ('t', 'q', 'run', 5, 'runnable', NULL, 0, NULL) RETURNING id", row -> row.get(0, Long.class));
        // A lease moved earlier by hand (the engines only extend leases): recorded again, so the reaper looks when
        // it lapses, not when the claim's first lease would have.
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
                ids.get(1));
        assertThat(ledger(db)).containsExactly(
                "stamped w1 {%d,%d,%d}".formatted(ids.get(0), ids.get(1), ids.get(2)),
                "stamped old-engine {%d}".formatted(ids.get(2)),
                "- w2 {%d}".formatted(inserted.get(0)), "- w2 {%d}".formatted(inserted.get(1)),
                "stamped w1 {%d}".formatted(ids.get(1)));
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_claims WHERE check_at < now()",
                row -> row.get(0, Long.class))).containsExactly(1L);
    }

    @Test
    void theSweepRecoversLapsedClaimsAndForgetsLedgerRowsWhoseClaimsAllEnded(TestDatabase db) {
        migrate(db);
        LeaseSql leases = new LeaseSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        List<Long> ids = runnable(db, 5);
        claim(db, "w1", 60, ids.get(0), ids.get(1)); // one lapses below, one lives on
        claim(db, "w1", 60, ids.get(2)); // settles
        claim(db, "w1", 60, ids.get(3)); // is claimed again by another worker
        claim(db, "w2", 60, ids.get(4)); // its ledger row is not due yet
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
                ids.get(0));
        Sql.update(db, "DELETE FROM {schema}.durable_instances WHERE id = $1", ids.get(2));
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'runnable', claimed_by = NULL, lease_expires_at = NULL"
                + " WHERE id = $1", ids.get(3));
        claim(db, "w3", 60, ids.get(3));
        // The check time of w1's ledger rows has come (a lease's worth later, here moved to now).
        Sql.update(db, "UPDATE {schema}.durable_claims SET check_at = now() - interval '1 second' WHERE claimed_by = 'w1'");

        Recovery recovery = leases.recoverExpired(0, null, "", 100, (type, attempt) -> 0, WAIT).block(WAIT);
        assertThat(recovery.recovered()).extracting(Transition::id).containsExactly(ids.get(0));
        // The pick's, the settled row's, the re-claimed row's, and the lapse's own (the lease moved earlier by hand).
        assertThat(recovery.claimsLookedAt()).isEqualTo(4);
        // The settled and the re-claimed rows' ledger rows are gone; w2's and the new claim's are untouched. The
        // pick's keeps its live claim, and it and the lapse's still look due: the lapsed row was recovered after
        // the look (a row another transaction held would have been skipped, and must be looked at again).
        assertThat(ledger(db)).containsExactly("stamped w1 {%d,%d}".formatted(ids.get(0), ids.get(1)),
                "stamped w2 {%d}".formatted(ids.get(4)), "stamped w1 {%d}".formatted(ids.get(0)),
                "stamped w3 {%d}".formatted(ids.get(3)));
        String waitsForTheLiveLease = "SELECT c.check_at = i.lease_expires_at FROM {schema}.durable_claims c"
                + " JOIN {schema}.durable_instances i ON i.id = $1 WHERE c.claimed_by = 'w1'";
        assertThat(Sql.query(db, waitsForTheLiveLease, row -> row.get(0, Boolean.class), ids.get(1)))
                .containsExactly(false, false);

        // The next look finds the live claim alone, which waits for its lease, and forgets the lapse's.
        recovery = leases.recoverExpired(0, null, "", 100, (type, attempt) -> 0, WAIT).block(WAIT);
        assertThat(recovery.recovered()).isEmpty();
        assertThat(recovery.claimsLookedAt()).isEqualTo(2);
        assertThat(Sql.query(db, waitsForTheLiveLease, row -> row.get(0, Boolean.class), ids.get(1))).containsExactly(true);

        // Nothing due: nothing looked at.
        recovery = leases.recoverExpired(0, null, "", 100, (type, attempt) -> 0, WAIT).block(WAIT);
        assertThat(recovery.recovered()).isEmpty();
        assertThat(recovery.claimsLookedAt()).isZero();
    }
}
