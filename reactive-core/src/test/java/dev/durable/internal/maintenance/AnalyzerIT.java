package dev.durable.internal.maintenance;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.JobDefinition;
import dev.durable.Maintenance;
import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.Db;
import dev.durable.internal.sql.PickSql;
import dev.durable.internal.sql.StatisticsSql;
import dev.durable.internal.sql.Tables;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The analyzer makes the plans kept from an empty hot table be made again once it fills: a pick
 * prepared as the driver prepares it, with its generic plan made while the table was a page whose
 * statistics said it was empty (a queue that drained), scans the whole table for its priorities and
 * for the claim once 20,000 runnable rows arrive (the shootout's slow picks after a drain); with autovacuum off for the
 * table nothing else refreshes them. The engine's analyzer, on its tick, ANALYZEs the table and the
 * kept plan is made again over the pick index. A role that may not ANALYZE is told once and its
 * passes do not fail.
 */
@ExtendWith(PostgresExtension.class)
class AnalyzerIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final int BACKLOG = 20_000;

    @Test
    void aPlanKeptFromAnEmptyHotTableIsMadeAgainOnceItFills(TestDatabase db) throws Exception {
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .analyzer(TaskOptions.every(Duration.ofMillis(200))).build())
                .register(JobDefinition.of("t", String.class, (String args) -> Mono.<Void>empty()).queue("q"))
                .build();
        engine.migrate().block(WAIT);
        String instances = instances(db);
        db.execute("ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
        // A queue that ran, drained and was vacuumed (its pages truncated) and analyzed empty, then got
        // a few rows again: a page, and the statistics of an empty table.
        String rows = "INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                + " SELECT 't', 'elsewhere', 'run', 5 FROM generate_series(1, ";
        db.execute(rows + "20)");
        db.execute("DELETE FROM " + instances);
        db.execute("VACUUM ANALYZE " + instances);
        db.execute(rows + "5)");
        PickSql picks = new PickSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()), List.of(),
                List.of(), Map.of("t", 1));

        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // The pick as a connection keeps it: a generic plan, made now, over the empty table.
            Sql.run(connection, "CREATE FUNCTION pg_temp.prepare_pick(q text) RETURNS void LANGUAGE plpgsql AS"
                    + " 'BEGIN EXECUTE ''PREPARE durable_pick AS '' || q; END'");
            Sql.run(connection, "CREATE FUNCTION pg_temp.cached_plan() RETURNS SETOF text LANGUAGE plpgsql AS"
                    + " 'BEGIN RETURN QUERY EXECUTE ''EXPLAIN (COSTS OFF) EXECUTE durable_pick(''''elsewhere'''', 256,"
                    + " ''''w'''', 30000, ''''{t}'''', ''''{1,1}'''')''; END'");
            Sql.run(connection, "SET plan_cache_mode = force_generic_plan");
            Sql.lines(connection, "SELECT pg_temp.prepare_pick($1)", picks.pickText());
            String madeEmpty = Sql.lines(connection, "SELECT pg_temp.cached_plan()", null);

            // A backlog of a queue this engine does not run, so it stays.
            db.execute(rows + BACKLOG + ")");
            String kept = Sql.lines(connection, "SELECT pg_temp.cached_plan()", null);
            assertThat(kept).isEqualTo(madeEmpty).contains("Seq Scan on durable_instances");

            engine.start().block(WAIT);
            try {
                // Waits for the plan itself: ANALYZE writes reltuples in place, seen by other sessions
                // before its transaction commits, and the kept plan is dropped only at that commit (a
                // slow WAL flush later), so a plan read as soon as reltuples grew may still be the old one.
                // Both together: another invalidation (a reset of the plan cache) would also make the
                // plan again, from the table's pages, before any ANALYZE.
                String madeAgain = Eventually.until("the backlog analyzed and the kept plan made again", WAIT,
                        () -> reltuples(db) >= BACKLOG ? Sql.lines(connection, "SELECT pg_temp.cached_plan()", null) : "",
                        plan -> plan.contains("durable_instances") && !plan.contains("Seq Scan on durable_instances"));
                assertThat(madeAgain).contains("Index Scan using durable_instances_pick_idx");
                Maintenance maintenance = engine.maintenance().orElseThrow();
                // Fresh statistics: a pass finds nothing to do, and none failed.
                assertThat(maintenance.analyze().block(WAIT)).isZero();
                assertThat(maintenance.stats().failures()).isZero();
            } finally {
                engine.closeLater().block(WAIT);
            }
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }

    @Test
    void aRoleThatMayNotAnalyzeLeavesTheTableToAutovacuumWithoutFailing(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        String instances = instances(db);
        String role = "durable_no_analyze_"
                + db.schema().toLowerCase(java.util.Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
        db.execute("ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
        db.execute("ANALYZE " + instances);
        db.execute("DROP ROLE IF EXISTS " + role);
        db.execute("CREATE ROLE " + role + " LOGIN PASSWORD 'secret'");
        db.execute("GRANT USAGE ON SCHEMA \"" + db.schema() + "\" TO " + role);
        db.execute("GRANT SELECT ON ALL TABLES IN SCHEMA \"" + db.schema() + "\" TO " + role);
        db.execute("INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                + " SELECT 't', 'elsewhere', 'run', 5 FROM generate_series(1, " + BACKLOG + ")");
        try {
            String url = db.url().replaceFirst("//[^@/]*@", "//" + role + ":secret@");
            var factory = ConnectionFactories.get(url);
            StatisticsSql sql = new StatisticsSql(new Db(factory, WAIT), db.schema());
            Lane lane = new Lane("analyzer-it");
            Analyzer analyzer = new Analyzer(TaskOptions.every(Duration.ofSeconds(1)), lane, Schedulers.parallel(),
                    new SimpleMeterRegistry(), sql);
            Eventually.until("the table stale", WAIT, () -> sql.stale(1_000, 2.0, WAIT).block(WAIT).stream()
                    .anyMatch(stale -> stale.table().equals("durable_instances")));
            assertThat(sql.stale(1_000, 2.0, WAIT).block(WAIT))
                    .contains(new StatisticsSql.Stale("durable_instances", false, role));
            assertThat(analyzer.pass().block(WAIT)).isZero();
            assertThat(analyzer.pass().block(WAIT)).isZero(); // told once, skipped again
            assertThat(analyzer.failures()).isZero();
            assertThat(reltuples(db)).isZero(); // left to autovacuum (off here)
            lane.close();
        } finally {
            db.execute("DROP OWNED BY " + role);
            db.execute("DROP ROLE " + role);
        }
    }

    private static String instances(TestDatabase db) {
        return "\"" + db.schema() + "\".durable_instances";
    }

    private static long reltuples(TestDatabase db) {
        return Sql.query(db, "SELECT reltuples::bigint FROM pg_class WHERE oid = '" + instances(db) + "'::regclass",
                row -> row.get(0, Long.class)).get(0);
    }
}
