package dev.durable.testing;

import dev.durable.EngineOptions;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
    private final List<Runnable> onClose = new ArrayList<>();

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

    /** Runs {@code cleanup} when this database closes (before its schema is dropped). */
    synchronized void onClose(Runnable cleanup) {
        onClose.add(cleanup);
    }

    /** Drops the schema and closes the pool. */
    @Override
    public synchronized void close() {
        onClose.forEach(Runnable::run);
        onClose.clear();
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
