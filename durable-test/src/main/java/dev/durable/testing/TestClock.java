package dev.durable.testing;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Flux;

/**
 * A clock a test drives: the engine's "now" (eligibility, backoff, leases, await deadlines, recurring
 * schedules, rate buckets) moved forward by {@link #advance} or {@link #jumpTo} without waiting.
 *
 * <p>How: Durable's statements read the time with {@code now()} and name their tables with the schema,
 * so the engine's connections get a {@code search_path} whose first schema holds a function
 * {@code now()} = the server's {@code pg_catalog.now()} plus a shift the test sets. PostgreSQL looks up
 * an unqualified function on the search path before {@code pg_catalog} when {@code pg_catalog} is
 * named after it. Nothing in the engine changes: an engine built without {@link #engineOptions()}
 * runs on the server's clock, and the database stays the only source of time.
 *
 * <p>The rule: advance while no run is in flight (after a {@link DurableTesting#drain}, which itself
 * advances only when the queues are idle). Leases of executing rows and the engine registry's expiries
 * are shifted with the clock, so an advance does not make the reaper take back runs; a heartbeat that
 * races the advance could still write a lease from before it. The clock only moves forward.
 *
 * <pre>{@code
 * TestClock clock = TestClock.on(db);
 * DurableEngine engine = DurableEngine.builder(clock.engineOptions().queue("default").build())...;
 * clock.advance(Duration.ofHours(1));
 * }</pre>
 */
public final class TestClock {

    private static final Map<String, TestClock> BY_URL = new ConcurrentHashMap<>();

    private final TestDatabase db;
    private final String clockSchema;
    private final String url;

    private TestClock(TestDatabase db, String clockSchema, String url) {
        this.db = db;
        this.clockSchema = clockSchema;
        this.url = url;
    }

    /** A clock for engines on {@code db}, starting at the server's time; one per database. */
    public static synchronized TestClock on(TestDatabase db) {
        String clockSchema = db.schema() + "_clock";
        String url = withSearchPath(db.url(), clockSchema);
        TestClock existing = BY_URL.get(url);
        if (existing != null) {
            return existing;
        }
        String q = '"' + clockSchema + '"';
        TestPostgres.run(db.url(), "CREATE SCHEMA IF NOT EXISTS " + q + ";"
                + " CREATE TABLE IF NOT EXISTS " + q + ".durable_test_clock"
                + " (id int PRIMARY KEY CHECK (id = 1), shift interval NOT NULL);"
                + " INSERT INTO " + q + ".durable_test_clock VALUES (1, interval '0') ON CONFLICT DO NOTHING;"
                + " CREATE OR REPLACE FUNCTION " + q + ".now() RETURNS timestamptz LANGUAGE sql STABLE AS"
                + " $$ SELECT pg_catalog.now() + shift FROM " + q + ".durable_test_clock WHERE id = 1 $$");
        TestClock clock = new TestClock(db, clockSchema, url);
        db.onClose(clock::drop);
        BY_URL.put(url, clock);
        return clock;
    }

    /** The clock of an engine built on {@link #engineOptions()}, if it was. */
    public static Optional<TestClock> of(DurableEngine engine) {
        String engineUrl = engine.options().url();
        return engineUrl == null ? Optional.empty() : Optional.ofNullable(BY_URL.get(engineUrl));
    }

    private static String withSearchPath(String url, String clockSchema) {
        return url + (url.contains("?") ? "&" : "?") + "schema=" + clockSchema + ",pg_catalog";
    }

    /** Engine options on the database's schema whose connections read this clock. */
    public EngineOptions.Builder engineOptions() {
        return EngineOptions.builder().url(url).schema(db.schema());
    }

    /** The R2DBC URL whose connections read this clock (for the test's own statements). */
    public String url() {
        return url;
    }

    /** The clock's time now, read from the database. */
    public Instant now() {
        return Flux.usingWhen(TestPostgres.connectionFactory(url).create(),
                        (Connection connection) -> Flux.from(connection.createStatement("SELECT now()").execute())
                                .concatMap((Result result) -> result.map(row -> row.get(0, Instant.class))),
                        Connection::close)
                .single()
                .block(Duration.ofSeconds(60));
    }

    /** Moves the clock forward by {@code duration}, shifting leases and engine expiries with it. */
    public TestClock advance(Duration duration) {
        if (duration.isNegative()) {
            throw new IllegalArgumentException("the test clock only moves forward, not by " + duration);
        }
        String by = "(" + duration.toMillis() + " * interval '1 millisecond')";
        String instances = table("durable_instances");
        String engines = table("durable_engines");
        // One transaction: no statement sees the new time with the old leases.
        TestPostgres.run(db.url(), "DO $$ BEGIN"
                + " UPDATE \"" + clockSchema + "\".durable_test_clock SET shift = shift + " + by + ";"
                + " IF to_regclass('" + instances.replace("'", "''") + "') IS NOT NULL THEN"
                + "   UPDATE " + instances + " SET lease_expires_at = lease_expires_at + " + by
                + "    WHERE lease_expires_at IS NOT NULL;"
                + " END IF;"
                + " IF to_regclass('" + engines.replace("'", "''") + "') IS NOT NULL THEN"
                + "   UPDATE " + engines + " SET expires_at = expires_at + " + by + ";"
                + " END IF;"
                + " END $$");
        return this;
    }

    /** Moves the clock forward to {@code instant} (nothing happens when it is already past it). */
    public TestClock jumpTo(Instant instant) {
        Duration ahead = Duration.between(now(), instant);
        if (!ahead.isNegative() && !ahead.isZero()) {
            advance(ahead);
        }
        return this;
    }

    private String table(String name) {
        return '"' + db.schema() + "\"." + name;
    }

    private void drop() {
        BY_URL.remove(url);
        TestPostgres.run(db.url(), "DROP SCHEMA IF EXISTS \"" + clockSchema + "\" CASCADE");
    }

    @Override
    public String toString() {
        return "TestClock{schema=" + clockSchema + "}";
    }
}
