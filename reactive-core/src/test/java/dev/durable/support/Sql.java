package dev.durable.support;

import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Row;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import reactor.core.publisher.Flux;

/** The test's own SQL against a test database, blocking (tests only). */
public final class Sql {

    private Sql() {
    }

    public static long update(TestDatabase db, String sql, Object... args) {
        return Flux.usingWhen(db.connectionFactory().create(), (Connection c) -> {
                    var statement = c.createStatement(sql.replace("{schema}", '"' + db.schema() + '"'));
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated);
                }, Connection::close)
                .reduce(0L, Long::sum)
                .block(Duration.ofSeconds(30));
    }

    public static <T> List<T> query(TestDatabase db, String sql, Function<Row, T> mapper, Object... args) {
        return Flux.usingWhen(db.connectionFactory().create(), (Connection c) -> {
                    var statement = c.createStatement(sql.replace("{schema}", '"' + db.schema() + '"'));
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).flatMap(r -> r.map((row, meta) -> mapper.apply(row)));
                }, Connection::close)
                .collectList()
                .block(Duration.ofSeconds(30));
    }

    public static long count(TestDatabase db, String where) {
        return query(db, "SELECT count(*) FROM {schema}.durable_instances_all WHERE " + where,
                row -> row.get(0, Long.class)).get(0);
    }

    /** Runs {@code sql} on an open connection (a session the test holds: temp functions, prepared plans). */
    public static void run(Connection connection, String sql) {
        Flux.from(connection.createStatement(sql).execute()).flatMap(Result::getRowsUpdated)
                .blockLast(Duration.ofSeconds(60));
    }

    /** The rows of {@code sql} (one text column) on an open connection, one a line; {@code parameter} bound as $1 unless null. */
    public static String lines(Connection connection, String sql, String parameter) {
        var statement = connection.createStatement(sql);
        if (parameter != null) {
            statement.bind(0, parameter);
        }
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(row -> String.valueOf(row.get(0, String.class))))
                .collectList().map(rows -> String.join("\n", rows)).block(Duration.ofSeconds(60));
    }
}
