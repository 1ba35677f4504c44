package dev.durable.benchmarks.sql;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Statements;
import dev.durable.internal.sql.Tables;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A fresh schema with Durable's tables for one benchmark trial, the engine's own statements over a
 * small pool, and one connection for set-up SQL. Embedded PostgreSQL unless DURABLE_PG_URL is set.
 */
final class BenchDatabase implements AutoCloseable {

    static final String QUEUE = "bench";
    static final String WORKER = "bench-worker";
    static final long LEASE_MILLIS = 30_000;
    private static final Duration WAIT = Duration.ofMinutes(5);

    final TestDatabase database;
    final DurableEngine engine;
    final Tables tables;
    final Statements statements;
    final ConnectionPool pool;
    private final Connection admin;

    BenchDatabase(String label) {
        this.database = TestPostgres.newDatabase(label);
        EngineOptions options = EngineOptions.builder().url(database.url()).schema(database.schema())
                .poolMaxSize(4).build();
        this.engine = DurableEngine.builder(options)
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty()).queue(QUEUE))
                .build();
        engine.migrate().block(WAIT);
        this.tables = new Tables(database.schema());
        this.pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(database.url()))
                .maxSize(4).build());
        this.statements = Statements.create(new Db(pool, Duration.ofMinutes(1)), database.schema(), java.util.List.of(), java.util.List.of(),
                java.util.Map.of("noop", 1), EngineOptions.DEFAULT_MAX_INBOX_SIGNALS);
        this.admin = Mono.from(ConnectionFactories.get(database.url()).create()).block(WAIT);
    }

    String instances() {
        return tables.table("durable_instances");
    }

    /** The settled instances, which the statement that settles them moves out of {@link #instances}. */
    String history() {
        return tables.table("durable_history");
    }

    /**
     * Adds {@code count} rows in one INSERT ... SELECT generate_series (a million in seconds),
     * runnable, or executing and claimed by {@link #WORKER} when {@code executing}.
     */
    void fill(int count, boolean executing) {
        String status = executing ? "'executing'" : "'runnable'";
        String claimedBy = executing ? "'" + WORKER + "'" : "NULL";
        String lease = executing ? "now() + interval '1 hour'" : "NULL";
        execute("INSERT INTO " + instances() + " (type, queue, step, state, max_attempts, status, claimed_by,"
                + " lease_expires_at) SELECT 'noop', '" + QUEUE + "', 'run', to_jsonb(g), 20, " + status + ", "
                + claimedBy + ", " + lease + " FROM generate_series(1, " + count + ") AS g");
        execute("VACUUM ANALYZE " + instances());
    }

    /** Ids of the rows in id order. */
    List<Long> ids() {
        return Flux.from(admin.createStatement("SELECT id FROM " + instances() + " ORDER BY id").execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))
                .collectList()
                .block(WAIT);
    }

    void execute(String statement) {
        Flux.from(admin.createStatement(statement).execute()).flatMap(Result::getRowsUpdated).then().block(WAIT);
    }

    /** Runs a statement with one array binding. */
    void execute(String statement, Object array) {
        Flux.from(admin.createStatement(statement).bind(0, array).execute())
                .flatMap(Result::getRowsUpdated).then().block(WAIT);
    }

    Connection admin() {
        return admin;
    }

    @Override
    public void close() {
        Mono.from(admin.close()).block(WAIT);
        pool.disposeLater().block(WAIT);
        engine.closeLater().block(WAIT);
        database.close();
    }
}
