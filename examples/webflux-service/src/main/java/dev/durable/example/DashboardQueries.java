package dev.durable.example;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The dashboard's two read-only queries: counts by queue and status, and the newest instances.
 *
 * <p>They are plain SQL on Durable's table because the engine's API has neither (its
 * {@code list} walks ids upwards and counts nothing); both read the documented schema only. They use
 * a two-connection pool of their own, so a dashboard left open never takes the engine's connections.
 */
@Component
public class DashboardQueries implements DisposableBean {

    private final DurableEngine engine;
    private final @Nullable ConnectionPool ownPool;
    private final ConnectionFactory connections;
    private final String countsSql;
    private final String recentSql;

    public DashboardQueries(DurableEngine engine) {
        this.engine = engine;
        EngineOptions options = engine.options();
        if (options.connectionFactory() != null) {
            this.ownPool = null;
            this.connections = options.connectionFactory();
        } else {
            this.ownPool = new ConnectionPool(ConnectionPoolConfiguration.builder(
                            ConnectionFactories.get(String.valueOf(options.url())))
                    .name("durable-dashboard").initialSize(0).maxSize(2).maxIdleTime(Duration.ofMinutes(1))
                    .build());
            this.connections = ownPool;
        }
        // The schema name is validated as an identifier by EngineOptions; quoted for case.
        String table = "\"" + options.schema() + "\".durable_instances";
        this.countsSql = "SELECT queue, status, count(*) AS n FROM " + table + " GROUP BY queue, status";
        this.recentSql = "SELECT id, type, queue, status, step, attempt, max_attempts, last_error, parent_id,"
                + " correlation_key, inserted_at, updated_at FROM " + table + " ORDER BY id DESC LIMIT $1";
    }

    /** Every queue the engine runs or that has rows, each with a count for every status. */
    public Mono<List<QueueCounts>> queues() {
        Map<String, Map<String, Long>> byQueue = new TreeMap<>();
        engine.options().queues().keySet().forEach(queue -> byQueue.put(queue, zeroCounts()));
        return Flux.usingWhen(connections.create(),
                        (Connection connection) -> Flux.from(connection.createStatement(countsSql).execute())
                                .flatMap(result -> result.map((row, meta) -> new Object[] {
                                        row.get("queue", String.class), row.get("status", String.class),
                                        row.get("n", Long.class)})),
                        Connection::close)
                .collectList()
                .map(rows -> {
                    for (Object[] row : rows) {
                        byQueue.computeIfAbsent((String) row[0], queue -> zeroCounts()).put((String) row[1], (Long) row[2]);
                    }
                    return byQueue.entrySet().stream()
                            .map(entry -> new QueueCounts(entry.getKey(), entry.getValue(),
                                    engine.options().queues().containsKey(entry.getKey())))
                            .toList();
                });
    }

    /** The newest instances, newest first. */
    public Flux<InstanceView> recent(int limit) {
        return Flux.usingWhen(connections.create(),
                (Connection connection) -> Flux.from(connection.createStatement(recentSql).bind("$1", limit).execute())
                        .flatMap(result -> result.map((row, meta) -> new InstanceView(
                                row.get("id", Long.class), row.get("type", String.class),
                                row.get("queue", String.class), row.get("status", String.class),
                                row.get("step", String.class), row.get("attempt", Integer.class),
                                row.get("max_attempts", Integer.class), row.get("last_error", String.class),
                                row.get("parent_id", Long.class), row.get("correlation_key", String.class),
                                row.get("inserted_at", Instant.class), row.get("updated_at", Instant.class)))),
                Connection::close);
    }

    private static Map<String, Long> zeroCounts() {
        Map<String, Long> counts = new LinkedHashMap<>();
        Arrays.stream(InstanceStatus.values()).forEach(status -> counts.put(status.sqlName(), 0L));
        return counts;
    }

    @Override
    public void destroy() {
        if (ownPool != null) {
            ownPool.dispose();
        }
    }

    /** One queue's counts by status ({@code runnable}, {@code executing}, ... as stored). */
    public record QueueCounts(String queue, Map<String, Long> counts, boolean runHere) {
    }

    /** One instance as the dashboard shows it. */
    public record InstanceView(long id, String type, String queue, String status, String step, int attempt,
            int maxAttempts, @Nullable String lastError, @Nullable Long parentId, @Nullable String correlationKey,
            Instant insertedAt, Instant updatedAt) {
    }
}
