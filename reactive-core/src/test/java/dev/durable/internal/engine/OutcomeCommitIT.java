package dev.durable.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.internal.Db;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Statements;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The outcome commit's guards on the real database: a stale run changes nothing, riders included. */
@ExtendWith(PostgresExtension.class)
class OutcomeCommitIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    private TestDatabase db;
    private Statements statements;
    private OutcomeCommit commit;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        statements = Statements.create(new Db(db.connectionFactory(), WAIT), db.schema(), List.of(),
                List.of(), Map.of(), EngineOptions.DEFAULT_MAX_INBOX_SIGNALS);
        commit = new OutcomeCommit(statements.db(), statements.outcomes(), statements.inserts());
    }

    /** A workflow row executing under worker {@code w} at attempt 2, with signal 'go' in its inbox. */
    private long[] executingWithASignal() {
        long id = Sql.query(db, "INSERT INTO {schema}.durable_instances (type, queue, step, state, max_attempts,"
                + " status, claimed_by, lease_expires_at, attempt, has_signals, awaited_signals)"
                + " VALUES ('flow', 'q', 'wait', '\"s\"', 5, 'executing', 'w', now() + interval '1 minute', 2, true,"
                + " ARRAY['go']) RETURNING id", row -> row.get(0, Long.class)).get(0);
        long signal = Sql.query(db, "INSERT INTO {schema}.durable_signals (instance_id, name) VALUES ($1, 'go')"
                + " RETURNING id", row -> row.get(0, Long.class), id).get(0);
        return new long[] {id, signal};
    }

    private static ClaimedRow claim(long id, int attempt) {
        return new ClaimedRow(id, "w", "flow", 1, "q", 0, 0, "wait", "\"s\"", attempt, 5, null, null, List.of("go"),
                List.of(), List.of(), null, null);
    }

    private boolean consumed(long signal) {
        return Sql.query(db, "SELECT consumed_at IS NOT NULL FROM"
                + " {schema}.durable_signals WHERE id = $1", row -> row.get(0, Boolean.class), signal).get(0);
    }

    /**
     * A late statement of an earlier claim (sent on a connection that froze, given up on, delivered
     * when it thawed) finds its row claimed again by the same worker, at the same attempt of the same
     * step: the first claim was reaped, another worker ran the step, which went on to itself (a
     * poller), and the first worker claimed it again. Worker, attempt and step cannot tell the two
     * claims apart; the claiming transaction does. The late release, the late commit and the late
     * signal consumption all leave the newer claim alone.
     */
    @Test
    void aLateReleaseOrCommitOfAnEarlierClaimLeavesTheSameWorkersNewerClaimOfTheSameStepAlone() {
        long id = Sql.query(db, "INSERT INTO {schema}.durable_instances (type, queue, step, state, max_attempts,"
                + " has_signals) VALUES ('flow', 'q', 'poll', '\"s\"', 5, true) RETURNING id",
                row -> row.get(0, Long.class)).get(0);
        long signal = Sql.query(db, "INSERT INTO {schema}.durable_signals (instance_id, name) VALUES ($1, 'go')"
                + " RETURNING id", row -> row.get(0, Long.class), id).get(0);
        ClaimedRow first = claim(id, "w");
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() - interval '1 second'"
                + " WHERE id = $1", id);
        assertThat(statements.leases().recoverExpired(0, null, "reaper", 10, (type, attempt) -> 0L, WAIT).block(WAIT)
                .recovered()).hasSize(1);
        ClaimedRow other = claim(id, "x");
        assertThat(commit.commit(List.of(OutcomeRow.next(other, "poll", "\"s\"", 0, OutcomeRow.LimitChange.NONE,
                List.of()))).block(WAIT).transitions()).hasSize(1);
        ClaimedRow second = claim(id, "w");
        assertThat(List.of(second.worker(), second.step(), second.attempt()))
                .as("the two claims' worker, step and attempt")
                .isEqualTo(List.of(first.worker(), first.step(), first.attempt()));

        assertThat(statements.leases().release(List.of(first), "w").collectList().block(WAIT))
                .as("rows the late release gave back").isEmpty();
        assertThat(commit.commit(List.of(OutcomeRow.next(first, "after", "\"s\"", 0, OutcomeRow.LimitChange.NONE,
                List.of(signal)))).block(WAIT).transitions()).as("the late commit's transitions").isEmpty();
        assertThat(commit.commit(List.of(OutcomeRow.done(first, "\"late\"", List.of()))).block(WAIT).transitions())
                .as("the late settle's transitions").isEmpty();
        assertThat(consumed(signal)).as("signal consumed by the late commit").isFalse();
        assertThat(Sql.query(db, "SELECT status || ' ' || step || ' ' || claimed_by FROM {schema}.durable_instances"
                + " WHERE id = $1", row -> row.get(0, String.class), id)).containsExactly("executing poll w");

        assertThat(commit.commit(List.of(OutcomeRow.done(second, "\"ok\"", List.of()))).block(WAIT).transitions())
                .as("the current claim's settle").hasSize(1);
    }

    /** Claims runnable row {@code id} for {@code worker} with the pick's own claim statement. */
    private ClaimedRow claim(long id, String worker) {
        return statements.db().inTransaction(connection -> statements.picks().locked()
                        .claimLocked(connection, List.of(id), worker, 60_000))
                .single().block(WAIT);
    }

    @Test
    void aRunOfAnEarlierClaimNeitherCommitsNorConsumesTheSignalsTheCurrentClaimAwaits() {
        long[] row = executingWithASignal();
        // The same worker's earlier claim (attempt 1): its run lost the lease, the row was claimed again.
        OutcomeRow stale = OutcomeRow.next(claim(row[0], 1), "after", "\"s\"", 0, OutcomeRow.LimitChange.NONE,
                List.of(row[1]));
        OutcomeCommit.Committed result = commit.commit(List.of(stale)).block(WAIT);
        assertThat(result.transitions()).isEmpty();
        assertThat(consumed(row[1])).as("signal consumed by a stale run").isFalse();
        assertThat(Sql.query(db, "SELECT step FROM {schema}.durable_instances WHERE id = $1",
                r -> r.get(0, String.class), row[0])).containsExactly("wait");

        // The current claim's run consumes it with its commit.
        OutcomeRow current = OutcomeRow.next(claim(row[0], 2), "after", "\"s\"", 0, OutcomeRow.LimitChange.NONE,
                List.of(row[1]));
        assertThat(commit.commit(List.of(current)).block(WAIT).transitions()).hasSize(1);
        assertThat(consumed(row[1])).isTrue();
    }

    @Test
    void aRetriedStepKeepsItsAwaitedSignalsAndItsJoinsChildrenUntilAnOutcomeMovesOn() {
        long[] row = executingWithASignal();
        Sql.update(db, "UPDATE {schema}.durable_instances SET has_children = true WHERE id = $1", row[0]);
        assertThat(commit.commit(List.of(OutcomeRow.retryStep(claim(row[0], 2), 0))).block(WAIT).transitions())
                .hasSize(1);
        assertThat(Sql.query(db, "SELECT array_to_string(awaited_signals, ',') || ' ' || has_children"
                + " FROM {schema}.durable_instances WHERE id = $1", r -> r.get(0, String.class), row[0]))
                .containsExactly("go true");
        assertThat(consumed(row[1])).isFalse();

        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'w',"
                + " lease_expires_at = now() + interval '1 minute', attempt = 1 WHERE id = $1", row[0]);
        assertThat(commit.commit(List.of(OutcomeRow.next(claim(row[0], 1), "after", "\"s\"", 0,
                OutcomeRow.LimitChange.NONE, List.of(row[1])))).block(WAIT).transitions()).hasSize(1);
        assertThat(Sql.query(db, "SELECT coalesce(array_to_string(awaited_signals, ','), '-') || ' ' || has_children"
                + " FROM {schema}.durable_instances WHERE id = $1", r -> r.get(0, String.class), row[0]))
                .containsExactly("- false");
        assertThat(consumed(row[1])).isTrue();
    }
}
