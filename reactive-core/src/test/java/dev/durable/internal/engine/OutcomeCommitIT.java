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
    private OutcomeCommit commit;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        Statements statements = Statements.create(new Db(db.connectionFactory(), WAIT), db.schema(), List.of(),
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
