package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Every statement of the engine, as rendered for a schema, is prepared by the real PostgreSQL
 * against the latest migration: a typo, a dropped column or a wrong parameter type fails here, not
 * on the first pick in production.
 */
@ExtendWith(PostgresExtension.class)
class StatementsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @Test
    void everyStatementPreparesAgainstTheLatestSchema(TestDatabase db) throws Exception {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);

        Db none = new Db(db.connectionFactory(), WAIT);
        Tables tables = new Tables(db.schema());
        List<Limits.Gate> gates = List.of(new Limits.Gate("g", 2, 1));
        List<Limits.RateLimit> rates = List.of(new Limits.RateLimit("r", 10, 5));
        Map<String, String> statements = new LinkedHashMap<>();
        PickSql picks = new PickSql(none, tables, gates, rates, Map.of("t", 1));
        for (Object group : List.of(new InstanceSql(none, tables), new InsertSql(none, tables),
                new PolicyInsertSql(none, tables), new OutcomeSql(tables), new LeaseSql(none, tables),
                new MaintenanceSql(none, tables), new RegistrySql(none, tables), new SignalSql(none, tables, 10),
                new LimiterSql(none, tables), picks, picks.fair(), picks.locked(),
                new ListingSql(none, tables), new StatusCountSql(none, tables, db.schema()),
                new DetailSql(none, tables), new AdminActionSql(none, tables), new LimitUsageSql(none, tables),
                new SearchIndexSql(none, tables, db.schema()), new ReplaySql(none, tables), new VersionSql(none, tables),
                new FairSql(none, tables), new KeySql(none, tables), new StatisticsSql(none, db.schema()))) {
            for (Field field : group.getClass().getDeclaredFields()) {
                if (field.getType() == String.class && !Modifier.isStatic(field.getModifiers())) {
                    field.setAccessible(true);
                    statements.put(group.getClass().getSimpleName() + "." + field.getName(), (String) field.get(group));
                }
            }
        }
        assertThat(statements).hasSizeGreaterThan(25);
        List<String> failures = new ArrayList<>();
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            // PREPARE checks a statement's names and types without running it. The driver binds
            // any $n it sees, so the text reaches PREPARE as a parameter of a session function.
            Flux.from(connection.createStatement("CREATE FUNCTION pg_temp.durable_check(q text) RETURNS void"
                            + " LANGUAGE plpgsql AS 'BEGIN EXECUTE ''PREPARE durable_check AS '' || q;"
                            + " EXECUTE ''DEALLOCATE durable_check''; END'").execute())
                    .flatMap(result -> result.getRowsUpdated()).blockLast(WAIT);
            for (Map.Entry<String, String> statement : statements.entrySet()) {
                String sql = statement.getValue().stripLeading();
                if (!sql.matches("(?is)^(SELECT|WITH|UPDATE|INSERT|DELETE)\\b.*")) {
                    continue; // LOCK TABLE and the like cannot be prepared
                }
                try {
                    Flux.from(connection.createStatement("SELECT pg_temp.durable_check($1)").bind(0, sql).execute())
                            .flatMap(result -> result.map(row -> 1)).blockLast(WAIT);
                } catch (RuntimeException refused) {
                    failures.add(statement.getKey() + ": " + refused.getMessage());
                }
            }
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
        assertThat(failures).isEmpty();
    }
}
