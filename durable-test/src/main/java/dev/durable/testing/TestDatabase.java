package dev.durable.testing;

import dev.durable.EngineOptions;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * One test class's database: the server's URL and a schema of its own. Engines built from
 * {@link #engineOptions()} use that schema; {@link #connectionFactory()} is a small pool for the
 * test's own SQL.
 */
public final class TestDatabase implements AutoCloseable {

    private final String url;
    private final String schema;
    private @Nullable ConnectionPool pool;

    TestDatabase(String url, String schema) {
        this.url = url;
        this.schema = schema;
    }

    public String url() {
        return url;
    }

    public String schema() {
        return schema;
    }

    /** Engine options on this database and schema (the engine defaults otherwise). */
    public EngineOptions.Builder engineOptions() {
        return EngineOptions.builder().url(url).schema(schema);
    }

    /** A pool for the test's own statements, closed with this database. */
    public synchronized ConnectionPool connectionFactory() {
        if (pool == null) {
            pool = new ConnectionPool(ConnectionPoolConfiguration.builder(TestPostgres.connectionFactory(url))
                    .maxSize(8).build());
        }
        return pool;
    }

    /** Runs one statement and waits for it (test set-up). */
    public void execute(String sql) {
        TestPostgres.run(url, sql);
    }

    /** Drops the schema and closes the pool. */
    @Override
    public synchronized void close() {
        if (pool != null) {
            pool.disposeLater().block(Duration.ofSeconds(30));
            pool = null;
        }
        TestPostgres.run(url, "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
    }

    @Override
    public String toString() {
        return "TestDatabase{schema=" + schema + "}";
    }
}
