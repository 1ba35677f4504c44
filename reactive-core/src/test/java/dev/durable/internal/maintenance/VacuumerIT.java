package dev.durable.internal.maintenance;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Maintenance;
import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.Db;
import dev.durable.internal.sql.VacuumSql;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.time.Duration;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The vacuumer removes a hot table's dead rows once there are ten thousand of them, without waiting
 * for autovacuum (off for the table here, as a minute's naptime would be in a test's time): the
 * rows of a queue that ran and settled leave dead versions behind, and the engine's tick VACUUMs
 * them away; the statement timeout it sets for the VACUUM does not stay on the connection; a snapshot
 * held open (whose dead rows no VACUUM can remove) costs one VACUUM per ten thousand new dead rows,
 * not one per tick. A role that may not VACUUM is skipped and its passes do not fail. (The class shares one schema: each
 * test counts the vacuums it adds.)
 */
@ExtendWith(PostgresExtension.class)
class VacuumerIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final int ROWS = 12_000;

    @Test
    void aHotTableWithTenThousandDeadRowsIsVacuumedOnTheEnginesTick(TestDatabase db) {
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .vacuumer(TaskOptions.every(Duration.ofMillis(200))).build())
                .build();
        engine.migrate().block(WAIT);
        String instances = instances(db);
        db.execute("ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
        db.execute("INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                + " SELECT 't', 'elsewhere', 'run', 5 FROM generate_series(1, " + ROWS + ")");
        db.execute("DELETE FROM " + instances);
        Eventually.until("the dead rows counted", WAIT, () -> deadRows(db) >= ROWS);
        long before = vacuums(db);

        engine.start().block(WAIT);
        try {
            Eventually.until("the table vacuumed", WAIT, () -> vacuums(db) > before && deadRows(db) < 10_000);
            Maintenance maintenance = engine.maintenance().orElseThrow();
            // Nothing dead is left: a pass finds nothing to do, and none failed.
            assertThat(maintenance.vacuum().block(WAIT)).isZero();
            assertThat(maintenance.stats().failures()).isZero();
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void theVacuumsStatementTimeoutDoesNotStayOnItsConnection(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        // A statement timeout of the connection's own, as the engine's pool sets it.
        ConnectionFactory withTimeout = ConnectionFactories.get(ConnectionFactoryOptions.parse(db.url()).mutate()
                .option(ConnectionFactoryOptions.STATEMENT_TIMEOUT, Duration.ofSeconds(45)).build());
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(withTimeout)
                .initialSize(1).maxSize(1).build());
        try {
            VacuumSql sql = new VacuumSql(new Db(pool, WAIT), db.schema());
            assertThat(statementTimeout(pool)).isEqualTo("45s");
            long before = vacuums(db);
            sql.vacuum("durable_instances", Duration.ofMillis(7_777)).block(WAIT);
            assertThat(statementTimeout(pool)).isEqualTo("45s");
            assertThat(vacuums(db)).isEqualTo(before + 1);
        } finally {
            pool.dispose();
        }
    }

    @Test
    void aHeldHorizonCostsOneVacuumPerTenThousandNewDeadRowsNotOnePerTick(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        String instances = instances(db);
        db.execute("ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
        VacuumSql sql = new VacuumSql(new Db(db.connectionFactory(), WAIT), db.schema());
        Lane lane = new Lane("vacuumer-held-it");
        Vacuumer vacuumer = new Vacuumer(TaskOptions.every(Duration.ofSeconds(1)), lane, Schedulers.parallel(),
                new SimpleMeterRegistry(), sql);
        // A snapshot held open: nothing deleted after it began can be removed.
        Connection holder = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Sql.run(holder, "BEGIN ISOLATION LEVEL REPEATABLE READ");
            Sql.run(holder, "SELECT count(*) FROM " + instances);
            long dead = deadRows(db);
            deadRowsOf(db, instances, ROWS);
            Eventually.until("the dead rows counted", WAIT, () -> deadRows(db) >= dead + ROWS);
            assertThat(vacuumer.pass().block(WAIT)).isEqualTo(1);
            // The VACUUM could remove none of them: the next ticks leave the table alone.
            assertThat(deadRows(db)).isGreaterThanOrEqualTo(ROWS);
            assertThat(vacuumer.pass().block(WAIT)).isZero();
            assertThat(vacuumer.pass().block(WAIT)).isZero();
            // Ten thousand more: one more VACUUM.
            long more = deadRows(db);
            deadRowsOf(db, instances, 10_000);
            Eventually.until("the new dead rows counted", WAIT, () -> deadRows(db) >= more + 10_000);
            assertThat(vacuumer.pass().block(WAIT)).isEqualTo(1);
            assertThat(vacuumer.failures()).isZero();
        } finally {
            Sql.run(holder, "ROLLBACK");
            Mono.from(holder.close()).block(WAIT);
            lane.close();
        }
    }

    /** Leaves {@code rows} dead rows in the instances table: inserted by one statement, deleted by another. */
    private static void deadRowsOf(TestDatabase db, String instances, int rows) {
        db.execute("INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                + " SELECT 't', 'elsewhere', 'run', 5 FROM generate_series(1, " + rows + ")");
        db.execute("DELETE FROM " + instances + " WHERE queue = 'elsewhere'");
    }

    private static String statementTimeout(ConnectionPool pool) {
        return Flux.usingWhen(pool.create(), connection -> Flux.from(connection.createStatement(
                                "SHOW statement_timeout").execute()).concatMap(result -> result.map(row -> row.get(0,
                                String.class))), Connection::close)
                .blockFirst(WAIT);
    }

    @Test
    void aRoleThatMayNotVacuumLeavesTheTableToAutovacuumWithoutFailing(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        String instances = instances(db);
        String role = "durable_no_vacuum_" + db.schema().toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
        db.execute("ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
        db.execute("DROP ROLE IF EXISTS " + role);
        db.execute("CREATE ROLE " + role + " LOGIN PASSWORD 'secret'");
        db.execute("GRANT USAGE ON SCHEMA \"" + db.schema() + "\" TO " + role);
        db.execute("GRANT SELECT ON ALL TABLES IN SCHEMA \"" + db.schema() + "\" TO " + role);
        db.execute("INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                + " SELECT 't', 'elsewhere', 'run', 5 FROM generate_series(1, " + ROWS + ")");
        db.execute("DELETE FROM " + instances);
        long before = vacuums(db);
        Lane lane = new Lane("vacuumer-it");
        try {
            String url = db.url().replaceFirst("//[^@/]*@", "//" + role + ":secret@");
            VacuumSql sql = new VacuumSql(new Db(ConnectionFactories.get(url), WAIT), db.schema());
            Vacuumer vacuumer = new Vacuumer(TaskOptions.every(Duration.ofSeconds(1)), lane, Schedulers.parallel(),
                    new SimpleMeterRegistry(), sql);
            Eventually.until("the dead rows counted", WAIT, () -> sql.dead(10_000, WAIT).block(WAIT).stream()
                    .anyMatch(dead -> dead.table().equals("durable_instances")));
            assertThat(sql.dead(10_000, WAIT).block(WAIT)).singleElement().satisfies(dead -> {
                assertThat(dead.table()).isEqualTo("durable_instances");
                assertThat(dead.mayVacuum()).isFalse();
                assertThat(dead.role()).isEqualTo(role);
            });
            assertThat(vacuumer.pass().block(WAIT)).isZero();
            assertThat(vacuumer.pass().block(WAIT)).isZero();
            assertThat(vacuumer.failures()).isZero();
            assertThat(vacuums(db)).isEqualTo(before); // left to autovacuum (off here)
        } finally {
            lane.close();
            db.execute("DROP OWNED BY " + role);
            db.execute("DROP ROLE " + role);
        }
    }

    private static String instances(TestDatabase db) {
        return "\"" + db.schema() + "\".durable_instances";
    }

    private static long deadRows(TestDatabase db) {
        return Sql.query(db, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '" + instances(db)
                + "'::regclass", row -> row.get(0, Long.class)).get(0);
    }

    private static long vacuums(TestDatabase db) {
        return Sql.query(db, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = '" + instances(db)
                + "'::regclass", row -> row.get(0, Long.class)).get(0);
    }
}
