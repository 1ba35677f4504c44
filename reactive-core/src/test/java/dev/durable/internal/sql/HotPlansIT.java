package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.ConflictPolicy;
import dev.durable.DurableEngine;
import dev.durable.internal.Db;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Statement;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The hot statements that address claimed rows by id (outcome commit, plain settle, release,
 * recovery) find each by its primary key, whatever the table's statistics say about executing
 * rows: their cost follows the batch, never the number of rows in flight. Checked with EXPLAIN
 * over 2,000 executing rows beside a 20,000-row backlog, once with statistics taken when almost
 * none were executing (the autoanalyze luck that once gave the commit a nested loop over every
 * executing row) and once with fresh ones. (Over a table of a few dozen pages the planner rightly
 * prefers one hash join over a sequential scan: linear too, and cheaper there.)
 */
@ExtendWith(PostgresExtension.class)
class HotPlansIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final int BATCH = 256;
    private static final Pattern ARRAY_PARAMETER = Pattern.compile("\\$(\\d+)::(bigint|int|text)\\[\\]");

    @Test
    void claimedRowsAreFoundByPrimaryKeyWhateverTheStatisticsSay(TestDatabase db) throws Exception {
        migrate(db);
        Tables tables = new Tables(db.schema());
        Db none = new Db(db.connectionFactory(), WAIT);
        OutcomeSql outcomes = new OutcomeSql(tables);
        // With tracing the commits ship one more array (each run's span context): the same plans.
        OutcomeSql traced = new OutcomeSql(tables, true);
        LeaseSql leases = new LeaseSql(none, tables);
        List<String> statements = List.of(text(outcomes, "commit"), text(outcomes, "settle"),
                text(traced, "commit"), text(traced, "settle"),
                text(leases, "release"), text(leases, "recoverLocked"));

        // A queue with a backlog: 20,000 runnable rows; statistics taken while 5 rows were executing.
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_instances (type, queue, step, max_attempts)"
                + " SELECT 't', 'q', 'run', 5 FROM generate_series(1, 20000)");
        executing(db, 5);
        db.execute("ANALYZE \"" + db.schema() + "\".durable_instances");
        executing(db, 1995);
        List<String> stale = plans(db, statements);
        // A transactional run's outcome goes alone, with generic plans (OutcomeSql.GENERIC_PLANS): the same.
        List<String> staleGeneric = genericPlans(db, statements.subList(0, 4));
        db.execute("ANALYZE \"" + db.schema() + "\".durable_instances");
        List<String> fresh = plans(db, statements);
        List<String> freshGeneric = genericPlans(db, statements.subList(0, 4));

        for (List<String> plans : List.of(stale, fresh, staleGeneric, freshGeneric)) {
            for (String plan : plans) {
                assertThat(plan).contains("Index Scan using durable_instances_pkey on durable_instances i")
                        .doesNotContain("Seq Scan on durable_instances")
                        .doesNotContain("durable_instances_gated_executing_idx");
            }
            // The commits join their rows to nothing: each row reads its outcome by position. A join to
            // the unnested outcomes gave, by the statistics of the moment, a merge join, a hash join over
            // the whole table, or a nested loop re-reading every outcome for every row.
            for (String commit : plans.subList(0, 4)) {
                assertThat(commit).doesNotContain("CTE Scan on o").doesNotContain("Merge Join")
                        .doesNotContain("Hash Join");
            }
        }
    }

    /**
     * The picks (plain, limited, fair) claim their rows by primary key, whatever the statistics say:
     * their generic plans (as a driver's prepared statement ends up with), made over a 20,000-row
     * backlog with statistics taken while the hot table was empty and with fresh ones, never scan
     * durable_instances. And a generic plan made while the table was empty (no pages: every scan
     * looks free), then run over the backlog, claims with one scan at worst, never a join that reads
     * the claimed rows again for every row of the table (the shootout's 670 ms picks, issue 16).
     */
    @Test
    void thePickClaimsByPrimaryKeyWhateverTheStatisticsSay(TestDatabase db) {
        migrate(db);
        Tables tables = new Tables(db.schema());
        Db none = new Db(db.connectionFactory(), WAIT);
        PickSql plain = new PickSql(none, tables, List.of(), List.of(), java.util.Map.of("t", 1));
        PickSql limited = new PickSql(none, tables, List.of(new dev.durable.Limits.Gate("g", 2, 1)),
                List.of(new dev.durable.Limits.RateLimit("r", 10, 5)), java.util.Map.of("t", 1));
        List<String> picks = List.of(plain.pickText(), limited.pickWithLimitsText(), plain.fairPickText(),
                text(limited.fair(), "fairPickWithLimits"));
        String instances = "\"" + db.schema() + "\".durable_instances";
        String backlog = "INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                + " SELECT 't', 'q', 'run', 5 FROM generate_series(1, 20000)";

        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // The driver binds any $n it sees: the texts reach EXPLAIN and PREPARE through session functions.
            Sql.run(connection, "CREATE FUNCTION pg_temp.generic_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS"
                    + " 'BEGIN RETURN QUERY EXECUTE ''EXPLAIN (COSTS OFF, GENERIC_PLAN) '' || q; END'");
            Sql.run(connection, "CREATE FUNCTION pg_temp.prepare_pick(q text) RETURNS void LANGUAGE plpgsql AS"
                    + " 'BEGIN EXECUTE ''PREPARE durable_pick AS '' || q; END'");
            Sql.run(connection, "CREATE FUNCTION pg_temp.cached_plan() RETURNS SETOF text LANGUAGE plpgsql AS"
                    + " 'BEGIN RETURN QUERY EXECUTE ''EXPLAIN (COSTS OFF) EXECUTE durable_pick(''''q'''', 256,"
                    + " ''''w'''', 30000, ''''{t}'''', ''''{1,1}'''')''; END'");

            // Statistics of the empty table; a plan made now, and kept, as a connection's prepared pick
            // (no autovacuum here: its ANALYZE would drop the kept plan).
            Sql.run(connection, "ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
            Sql.run(connection, "ANALYZE " + instances);
            Sql.run(connection, "SET plan_cache_mode = force_generic_plan");
            Sql.lines(connection, "SELECT pg_temp.prepare_pick($1)", plain.pickText());
            String madeEmpty = Sql.lines(connection, "SELECT pg_temp.cached_plan()", null);
            Sql.run(connection, backlog);
            String keptEmpty = Sql.lines(connection, "SELECT pg_temp.cached_plan()", null);
            assertThat(madeEmpty).isEqualTo(keptEmpty); // the plan made over the empty table, kept
            assertThat(keptEmpty).contains("id = ANY").doesNotContain("Join Filter");

            List<String> plans = genericPlansThenFresh(connection, instances, picks);
            for (String plan : plans) {
                assertThat(plan).doesNotContain("Seq Scan on durable_instances");
                if (plan.contains("Update on durable_instances i")) { // an index scan or a bitmap of the pkey
                    assertThat(plan).containsPattern("(Index Scan using durable_instances_pkey on durable_instances i(_\\d+)?\\b"
                            + "|Bitmap Heap Scan on durable_instances i(_\\d+)?\\s+Recheck Cond: \\(id = ANY [^\\n]*\\n"
                            + "\\s+->  Bitmap Index Scan on durable_instances_pkey)");
                }
            }
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }


    /**
     * The reaper's sweep of the ledger of claims (schema version 6) and awaitIdle's count of executing
     * rows look the ledger's ids up by primary key, whatever the statistics say: their generic plans,
     * made with statistics of an empty hot table and with fresh ones over a 20,000-row backlog and
     * 2,000 executing rows, never scan durable_instances (a plan that joined the ids to a scan of the
     * table read the whole backlog on every reaper tick).
     */
    @Test
    void theLedgersIdsAreFoundByPrimaryKeyWhateverTheStatisticsSay(TestDatabase db) {
        migrate(db);
        Tables tables = new Tables(db.schema());
        Db none = new Db(db.connectionFactory(), WAIT);
        List<String> statements = List.of(text(new LeaseSql(none, tables), "sweepClaims"),
                text(new InstanceSql(none, tables), "countBusy"));
        String instances = "\"" + db.schema() + "\".durable_instances";
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Sql.run(connection, "CREATE FUNCTION pg_temp.generic_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS"
                    + " 'BEGIN RETURN QUERY EXECUTE ''EXPLAIN (COSTS OFF, GENERIC_PLAN) '' || q; END'");
            Sql.run(connection, "ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
            Sql.run(connection, "ANALYZE " + instances);
            Sql.run(connection, "INSERT INTO " + instances + " (type, queue, step, max_attempts)"
                    + " SELECT 't', 'q', 'run', 5 FROM generate_series(1, 20000)");
            // Claimed 100 at a time, as picks do: 20 ledger rows.
            for (int pick = 0; pick < 20; pick++) {
                Sql.run(connection, "UPDATE " + instances + " SET status = 'executing', claimed_by = 'w', attempt = 1,"
                        + " lease_expires_at = now() + interval '1 minute', claim_xid = pg_current_xact_id()::text::bigint"
                        + " WHERE id IN (SELECT id FROM " + instances + " WHERE status = 'runnable' ORDER BY id LIMIT 100)");
            }
            List<String> plans = genericPlansThenFresh(connection, instances, statements);
            assertThat(Sql.lines(connection, "SELECT count(*)::text FROM \"" + db.schema() + "\".durable_claims", null))
                    .isEqualTo("20");
            for (String plan : plans) {
                assertThat(plan).doesNotContain("Seq Scan on durable_instances")
                        .containsPattern("(Index Scan|Bitmap Index Scan) (using|on) durable_instances_pkey");
            }
        } finally {
            Sql.run(connection, "DROP FUNCTION pg_temp.generic_plan(text)"); // the pool hands this session on
            Mono.from(connection.close()).block(WAIT);
        }
    }

    /**
     * A policy insert (skip, replace, debounce, reject mixed) finds each live holder through the
     * correlation index, as the arbiter of its ON CONFLICT, beside 20,000 live keyed rows: run with
     * EXPLAIN ANALYZE (so the conflicts really happen) in a transaction that is rolled back.
     */
    @Test
    void aPolicyInsertFindsHoldersThroughTheCorrelationIndex(TestDatabase db) {
        migrate(db);
        String sql = text(new PolicyInsertSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema())),
                "insertWithPolicies");
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_instances (type, queue, step, max_attempts,"
                + " correlation_key, correlation_statuses) SELECT 't', 'q', 'run', 5, 'key-' || g,"
                + " ARRAY['runnable', 'executing', 'awaiting_signal', 'awaiting_children']"
                + " FROM generate_series(1, 20000) g");
        db.execute("ANALYZE \"" + db.schema() + "\".durable_instances");
        List<ConflictPolicy> policies = List.of(ConflictPolicy.skip(), ConflictPolicy.replace(),
                ConflictPolicy.debounce(Duration.ofSeconds(5), Duration.ofMinutes(1)));
        List<InsertSql.Insertion> rows = new ArrayList<>();
        for (int i = 1; i <= 96; i++) {
            // Live keys under each policy, and free keys under each policy and reject.
            String key = i <= 48 ? "key-" + (i * 7) : "free-" + i;
            ConflictPolicy policy = i > 48 && i % 4 == 0 ? ConflictPolicy.reject() : policies.get(i % 3);
            rows.add(new InsertSql.Insertion(new Rows.NewInstance("t", 1, "q", 0, "run", "\"x\"", 5, null, 0, null,
                    null, key, "awaiting_children,awaiting_signal,executing,runnable", null, 0, null, null, null, policy, null),
                    null));
        }
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        String plan;
        try {
            Mono.from(connection.beginTransaction()).block(WAIT);
            plan = Flux.from(PolicyInsertSql.bindPolicies(connection.createStatement("EXPLAIN (ANALYZE, COSTS OFF) " + sql),
                            rows, 1000).execute())
                    .concatMap(result -> result.map(row -> row.get(0, String.class)))
                    .collectList().map(lines -> String.join("\n", lines)).block(WAIT);
            Mono.from(connection.rollbackTransaction()).block(WAIT);
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
        assertThat(plan).contains("Conflict Arbiter Indexes: durable_instances_correlation_uq")
                .contains("Conflicting Tuples: 16") // the skips
                .contains("Conflicting Tuples: 32") // the replaces and debounces
                .doesNotContain("Seq Scan on durable_instances");
    }

    /**
     * The generic plans of {@code statements} (pg_temp.generic_plan) with the statistics of the moment, then
     * with fresh ones (ANALYZE of {@code instances} in between).
     */
    private static List<String> genericPlansThenFresh(Connection connection, String instances, List<String> statements) {
        List<String> plans = new ArrayList<>();
        for (String statement : statements) {
            plans.add(Sql.lines(connection, "SELECT pg_temp.generic_plan($1)", statement));
        }
        Sql.run(connection, "ANALYZE " + instances);
        for (String statement : statements) {
            plans.add(Sql.lines(connection, "SELECT pg_temp.generic_plan($1)", statement));
        }
        return plans;
    }

    /** Durable's schema in the test's own (an engine that migrates it and closes). */
    private static void migrate(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
    }

    private static void executing(TestDatabase db, int rows) {
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_instances (type, queue, step, max_attempts, status,"
                + " claimed_by, lease_expires_at, attempt) SELECT 't', 'q', 'run', 5, 'executing', 'worker-' || (g % 8),"
                + " now() + interval '1 minute', 1 FROM generate_series(1, " + rows + ") g");
    }

    /** EXPLAIN of each statement with a batch of {@link #BATCH} claimed rows' ids in its arrays. */
    private static List<String> plans(TestDatabase db, List<String> statements) {
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Long[] ids = Flux.from(connection.createStatement("SELECT id FROM \"" + db.schema()
                            + "\".durable_instances WHERE status = 'executing' ORDER BY random() LIMIT " + BATCH).execute())
                    .concatMap(result -> result.map(row -> row.get(0, Long.class)))
                    .collectList().block(WAIT).toArray(Long[]::new);
            List<String> plans = new ArrayList<>();
            for (String sql : statements) {
                Statement explain = connection.createStatement("EXPLAIN " + sql);
                Matcher parameter = ARRAY_PARAMETER.matcher(sql);
                while (parameter.find()) {
                    int index = Integer.parseInt(parameter.group(1)) - 1;
                    Object[] values = switch (parameter.group(2)) {
                        case "bigint" -> index == 0 ? ids : new Long[BATCH];
                        case "int" -> filled(new Integer[BATCH], 1);
                        default -> filled(new String[BATCH], "x");
                    };
                    explain.bind(index, values);
                }
                if (sql.contains("$2 ")) {
                    explain.bind(1, "worker-1"); // the release's worker
                }
                plans.add(Flux.from(explain.execute())
                        .concatMap(result -> result.map(row -> row.get(0, String.class)))
                        .collectList().map(lines -> String.join("\n", lines)).block(WAIT));
            }
            return plans;
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }

    /** The generic plan of each statement (EXPLAIN (GENERIC_PLAN), as {@code plan_cache_mode = force_generic_plan} makes). */
    private static List<String> genericPlans(TestDatabase db, List<String> statements) {
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // The driver binds any $n it sees: the texts reach EXPLAIN through a session function.
            Sql.run(connection, "CREATE OR REPLACE FUNCTION pg_temp.generic_plan(q text) RETURNS SETOF text LANGUAGE"
                    + " plpgsql AS 'BEGIN RETURN QUERY EXECUTE ''EXPLAIN (GENERIC_PLAN) '' || q; END'");
            List<String> plans = new ArrayList<>();
            for (String sql : statements) {
                plans.add(Sql.lines(connection, "SELECT pg_temp.generic_plan($1)", sql));
            }
            return plans;
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }

    private static <T> T[] filled(T[] array, T value) {
        Arrays.fill(array, value);
        return array;
    }

    private static String text(Object group, String name) {
        try {
            Field field = group.getClass().getDeclaredField(name);
            field.setAccessible(true);
            return (String) field.get(group);
        } catch (ReflectiveOperationException missing) {
            throw new IllegalStateException(missing);
        }
    }
}
