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
 * <p>They are plain SQL on Durable's tables because the engine's API has neither (its
 * {@code list} walks ids upwards and counts nothing); both read the documented schema only. They use
 * a two-connection pool of their own, so a dashboard left open never takes the engine's connections.
 *
 * <p>Settled instances move from {@code durable_instances} (live rows, a few thousand) to the
 * append-only {@code durable_history} (every instance settled within the retention: millions on a
 * busy service). The dashboard polls, so the counts must not read the history whole: live counts
 * are exact (the hot table); failed and cancelled counts are exact through the history's partial
 * index over unsuccessful rows (an index-only scan of the few rows that did not succeed); done
 * counts are exact while the history is small, and beyond {@value #SAMPLED_ROWS} rows (the
 * planner's figure) are estimated from a block sample of about that many rows, scaled up
 * ({@code TABLESAMPLE SYSTEM}: a fixed cost, whatever the retention). The newest instances come
 * from {@code durable_instances_all} (both tables): newest first by id, a merge of the two primary
 * keys read backwards, stopped at the limit.
 */
@Component
public class DashboardQueries implements DisposableBean {

    private final DurableEngine engine;
    private final @Nullable ConnectionPool ownPool;
    private final ConnectionFactory connections;
    /** Beyond this many rows in the history, done counts come from a sample of about this many rows. */
    static final int SAMPLED_ROWS = 20_000;

    private final String historyName;
    private final String sizeSql;
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
        String schema = "\"" + options.schema() + "\"";
        String hot = schema + ".durable_instances";
        this.historyName = schema + ".durable_history";
        // reltuples: the planner's row count, -1 before the first vacuum or analyze (a new, small table).
        this.sizeSql = "SELECT reltuples::float8 AS n FROM pg_class WHERE oid = to_regclass($1)";
        // $1: the percentage of the history's blocks to read for done counts (100: all of them, exact).
        this.countsSql = "SELECT queue, status, count(*) AS n, false AS estimated FROM " + hot + " GROUP BY queue, status"
                + " UNION ALL SELECT queue, status, count(*), false FROM " + historyName
                + " WHERE status <> 'done' GROUP BY queue, status"
                + " UNION ALL SELECT queue, status, round(count(*) * 100 / $1::real)::bigint, $1::real < 100"
                + " FROM " + historyName + " TABLESAMPLE SYSTEM ($1::real) WHERE status = 'done' GROUP BY queue, status";
        this.recentSql = "SELECT id, type, queue, status, step, attempt, max_attempts, last_error, parent_id,"
                + " correlation_key, inserted_at, updated_at FROM " + schema + ".durable_instances_all"
                + " ORDER BY id DESC LIMIT $1";
    }

    /**
     * Every queue the engine runs or that has rows, each with a count for every status (a status
     * may have rows in both tables: a settled row whose correlation key stays occupied stays hot).
     */
    public Mono<List<QueueCounts>> queues() {
        Map<String, Map<String, Long>> byQueue = new TreeMap<>();
        Map<String, Boolean> estimated = new TreeMap<>();
        engine.options().queues().keySet().forEach(queue -> byQueue.put(queue, zeroCounts()));
        return Flux.usingWhen(connections.create(),
                        (Connection connection) -> Flux.from(connection.createStatement(sizeSql)
                                        .bind("$1", historyName).execute())
                                .flatMap(result -> result.map((row, meta) -> row.get("n", Double.class)))
                                .next()
                                .defaultIfEmpty(-1.0)
                                .flatMapMany(rows -> Flux.from(connection.createStatement(countsSql)
                                        .bind("$1", samplePercent(rows)).execute()))
                                .flatMap(result -> result.map((row, meta) -> new Object[] {
                                        row.get("queue", String.class), row.get("status", String.class),
                                        row.get("n", Long.class), row.get("estimated", Boolean.class)})),
                        Connection::close)
                .collectList()
                .map(rows -> {
                    for (Object[] row : rows) {
                        String queue = (String) row[0];
                        byQueue.computeIfAbsent(queue, q -> zeroCounts()).merge((String) row[1], (Long) row[2], Long::sum);
                        if (Boolean.TRUE.equals(row[3])) {
                            estimated.put(queue, true);
                        }
                    }
                    return byQueue.entrySet().stream()
                            .map(entry -> new QueueCounts(entry.getKey(), entry.getValue(),
                                    engine.options().queues().containsKey(entry.getKey()),
                                    estimated.getOrDefault(entry.getKey(), false)))
                            .toList();
                });
    }

    /** The share of the history's blocks to read for about {@link #SAMPLED_ROWS} rows; 100 reads all. */
    static double samplePercent(double historyRows) {
        return historyRows <= SAMPLED_ROWS ? 100.0 : Math.max(0.01, 100.0 * SAMPLED_ROWS / historyRows);
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

    /**
     * One queue's counts by status ({@code runnable}, {@code executing}, ... as stored);
     * {@code doneEstimated}: its done count was scaled up from a sample of the history.
     */
    public record QueueCounts(String queue, Map<String, Long> counts, boolean runHere, boolean doneEstimated) {
    }

    /** One instance as the dashboard shows it. */
    public record InstanceView(long id, String type, String queue, String status, String step, int attempt,
            int maxAttempts, @Nullable String lastError, @Nullable Long parentId, @Nullable String correlationKey,
            Instant insertedAt, Instant updatedAt) {
    }
}
