package dev.durable.testing;

import dev.durable.DurableEngine;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;

/**
 * The test kit's own reads of an engine's live rows (runnable and executing ones, in its instances
 * table), on the engine's database and clock. Blocking: tests only.
 */
final class EngineDatabase implements AutoCloseable {

    /** Executing rows, rows due (within the horizon) and the next later eligible time, of a scope. */
    record Stats(long executing, long due, @Nullable Instant nextEligible) {
        boolean idle() {
            return executing == 0 && due == 0;
        }
    }

    private static final Duration CALL = Duration.ofSeconds(30);

    private final ConnectionFactory factory;
    private final @Nullable ConnectionPool own;
    private final String instances;
    private final String signals;
    private final String history;
    private final String[] queues;

    EngineDatabase(DurableEngine engine) {
        ConnectionFactory configured = engine.options().connectionFactory();
        String url = engine.options().url();
        if (configured == null && url == null) {
            throw new IllegalStateException("the engine names no database");
        }
        // A drain reads every few milliseconds: one kept connection rather than a new one per read.
        this.own = configured != null ? null : new ConnectionPool(ConnectionPoolConfiguration
                .builder(TestPostgres.connectionFactory(url)).initialSize(0).maxSize(1).build());
        this.factory = configured != null ? configured : own;
        this.instances = '"' + engine.options().schema() + "\".durable_instances";
        this.signals = '"' + engine.options().schema() + "\".durable_signals";
        this.history = '"' + engine.options().schema() + "\".durable_history";
        this.queues = engine.options().queues().keySet().toArray(String[]::new);
    }

    /** Ids of the rows a drain without recursion waits for. */
    List<Long> dueNow(Duration horizon, boolean scheduledToo) {
        return query("SELECT id FROM " + instances + " WHERE queue = ANY($1) AND (status = 'executing'"
                        + " OR (status = 'runnable' AND ($3 OR eligible_at <= now() + $2 * interval '1 millisecond')))",
                statement -> statement.bind("$1", queues).bind("$2", horizon.toMillis()).bind("$3", scheduledToo),
                row -> row.get("id", Long.class));
    }

    /** Names of the signals the instance's steps consumed, in the order they were delivered. */
    List<String> consumedSignals(long id) {
        // A settled instance's consumed signals are kept by name in the history, its inbox gone.
        return query("SELECT name FROM (SELECT name, 0 AS settled, id AS ord FROM " + signals
                        + " WHERE instance_id = $1 AND consumed_at IS NOT NULL"
                        + " UNION ALL SELECT s.name, 1, s.ord FROM " + history + " h,"
                        + " unnest(h.signals) WITH ORDINALITY AS s(name, ord) WHERE h.id = $1) consumed"
                        + " ORDER BY settled, ord",
                statement -> statement.bind("$1", id), row -> row.get("name", String.class));
    }

    /** The scope's stats; {@code ids} null for every row of the engine's queues. */
    Stats stats(Duration horizon, @Nullable List<Long> ids) {
        String scope = ids == null ? "" : " AND id = ANY($3)";
        return query("SELECT count(*) FILTER (WHERE status = 'executing') AS executing,"
                        + " count(*) FILTER (WHERE status = 'runnable'"
                        + "   AND eligible_at <= now() + $2 * interval '1 millisecond') AS due,"
                        + " min(eligible_at) FILTER (WHERE status = 'runnable'"
                        + "   AND eligible_at > now() + $2 * interval '1 millisecond') AS next_eligible"
                        + " FROM " + instances + " WHERE queue = ANY($1)" + scope,
                statement -> {
                    statement.bind("$1", queues).bind("$2", horizon.toMillis());
                    if (ids != null) {
                        statement.bind("$3", ids.toArray(Long[]::new));
                    }
                    return statement;
                },
                row -> new Stats(row.get("executing", Long.class), row.get("due", Long.class),
                        row.get("next_eligible", Instant.class)))
                .get(0);
    }

    @Override
    public void close() {
        if (own != null) {
            own.disposeLater().block(CALL);
        }
    }

    private <T> List<T> query(String sql, Function<Statement, Statement> bind, Function<Readable, T> map) {
        return Flux.usingWhen(factory.create(),
                        (Connection connection) -> Flux.from(bind.apply(connection.createStatement(sql)).execute())
                                .concatMap(result -> result.map(map::apply)),
                        Connection::close)
                .collectList()
                .block(CALL);
    }
}
