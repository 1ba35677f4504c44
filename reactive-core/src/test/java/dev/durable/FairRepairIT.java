package dev.durable;

import static dev.durable.FairnessIT.insert;
import static dev.durable.FairnessIT.instances;
import static dev.durable.FairnessIT.picks;
import static dev.durable.FairnessIT.share;
import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.sql.PickSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The fair pick's edges, on the real database: a key row held by a caller's open transaction is
 * never waited on, a key parked while such a transaction held its row is healed, keyless and
 * cap-gated rows left from before still run, and a throttled key's backlog is not walked per pick.
 */
@ExtendWith(PostgresExtension.class)
class FairRepairIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    @Test
    void aPickNeverWaitsOnAKeyRowAnOpenInsertHolds(TestDatabase db) {
        PickSql picks = picks(db);
        PickSql.FairShare weights = share(Map.of(), 1);
        // Key p parks until its scheduled row comes due.
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key, eligible_at)"
                + " VALUES ('t', 'held', 'run', 5, 'p', now() + interval '1 second')");
        assertThat(picks.pick("held", 5, "w", 60_000, weights).block(WAIT).rows()).isEmpty();
        insert(db, "held", "other", 200);
        Connection holder = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // A caller's transaction inserts another row of the parked key and stays open: its
            // activation holds the key's row.
            begin(holder);
            execute(holder, "INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key)"
                    + " VALUES ('t', 'held', 'run', 5, 'p')");
            List<ClaimedRow> claimed = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (claimed.stream().noneMatch(row -> "p".equals(keyOf(db, row.id()))) && System.nanoTime() < deadline) {
                // Each pick answers (the Db bounds it by WAIT): p's scheduled row is claimed once due.
                claimed.addAll(picks.pick("held", 5, "w", 60_000, weights).block(WAIT).rows());
            }
            assertThat(claimed).as("picks went on beside the open transaction").hasSizeGreaterThan(1);
            assertThat(claimed.stream().filter(row -> "p".equals(keyOf(db, row.id())))).hasSize(1);
        } finally {
            Mono.from(holder.rollbackTransaction()).then(Mono.from(holder.close())).block(WAIT);
        }
    }

    static String keyOf(TestDatabase db, long id) {
        return Sql.query(db, "SELECT fairness_key FROM {schema}.durable_instances WHERE id = " + id,
                row -> row.get(0, String.class)).get(0);
    }

    static void begin(Connection connection) {
        Mono.from(connection.beginTransaction()).block(WAIT);
    }

    static void execute(Connection connection, String sql) {
        Flux.from(connection.createStatement(sql).execute()).concatMap(result -> result.getRowsUpdated()).blockLast(WAIT);
    }
}
