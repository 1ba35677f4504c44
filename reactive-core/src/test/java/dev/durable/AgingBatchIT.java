package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.sql.PickSql;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Priority aging's batch on the real database: when more rows are due for a step than one run lifts,
 * the run rewrites exactly its batch, the levels take turns (a large backlog in one level does not
 * hold back another level's aging), and which rows it lifts is fixed by the rows themselves.
 */
@ExtendWith(PostgresExtension.class)
class AgingBatchIT {

    private static final Duration WAIT = Duration.ofSeconds(120);
    private static final long STEP = Duration.ofMinutes(1).toMillis();

    @Test
    void aRunLiftsItsBatchTakingTurnsAcrossLevelsOldestFirst(TestDatabase db) {
        PickSql picks = FairnessIT.picks(db);
        // Level 3: 1,500 rows an hour and more overdue (row g is g seconds older), and one not yet due
        // for a step; levels 2 and 1: ten overdue rows each. Floor 0.
        insert(db, "l3", 3, 1_500, "interval '1 hour'");
        insert(db, "l3-young", 3, 1, "interval '0 seconds'");
        insert(db, "l2", 2, 10, "interval '1 hour'");
        insert(db, "l1", 1, 10, "interval '1 hour'");

        assertThat(picks.age("batch", STEP, 0, 100).block(WAIT)).as("rows rewritten by one run").isEqualTo(100L);

        // Turns: each level's oldest ten (levels 2 and 1 hold ten), then level 3's next seventy.
        assertThat(Sql.query(db, "SELECT type || '@' || priority || ' ' || count(*) FROM {schema}.durable_instances"
                + " WHERE queue = 'batch' GROUP BY type, priority ORDER BY type, priority", row -> row.get(0, String.class)))
                .containsExactly("l1@0 10", "l2@1 10", "l3@2 80", "l3@3 1420", "l3-young@3 1");
        // Level 3's lifted rows are its eighty oldest.
        assertThat(Sql.query(db, "SELECT min(state::text::int) || '-' || max(state::text::int) FROM {schema}.durable_instances"
                + " WHERE queue = 'batch' AND type = 'l3' AND priority = 2", row -> row.get(0, String.class)))
                .containsExactly("1421-1500");

        // The next run lifts its batch again, the levels again in turn: 2 (80 rows, lifted a step ago
        // and still overdue), 1 (10), and 3; level 1's rows at the floor stay there.
        assertThat(picks.age("batch", STEP, 0, 100).block(WAIT)).isEqualTo(100L);
        assertThat(Sql.count(db, "queue = 'batch' AND priority = 0")).isEqualTo(10L + 10L);
        assertThat(Sql.count(db, "queue = 'batch' AND priority < 0")).isZero();
    }

    private static void insert(TestDatabase db, String tag, int priority, int rows, String overdue) {
        db.execute("INSERT INTO " + FairnessIT.instances(db) + " (type, queue, step, state, max_attempts, priority, eligible_at)"
                + " SELECT '" + tag + "', 'batch', 'run', to_jsonb(g), 5, " + priority + ", now() - " + overdue
                + " - g * interval '1 second' FROM generate_series(1, " + rows + ") AS g");
    }
}
