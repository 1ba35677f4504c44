package dev.durable.redis.testing;

import dev.durable.Urls;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import redis.embedded.RedisServer;

/**
 * A handle on the tests' Redis: its URI, a way to empty it between test classes, and, when it is
 * the embedded server, a way to stop it and start it again on the same port (to test outages).
 * Blocking by design, like {@link TestRedis}.
 */
public final class TestRedisServer {

    private final String uri;
    private final @Nullable RedisServer embedded;

    private TestRedisServer(String uri, @Nullable RedisServer embedded) {
        this.uri = uri;
        this.embedded = embedded;
    }

    static TestRedisServer external(String uri) {
        return new TestRedisServer(uri, null);
    }

    static TestRedisServer embedded(RedisServer server, int port) {
        return new TestRedisServer("redis://127.0.0.1:" + port, server);
    }

    /** {@code redis://host:port}. */
    public String uri() {
        return uri;
    }

    public RedisURI redisUri() {
        return RedisURI.create(uri);
    }

    /** Whether this is the embedded server, which {@link #stop()} and {@link #start()} control. */
    public boolean isEmbedded() {
        return embedded != null;
    }

    /** Whether the server answers now. */
    public boolean isRunning() {
        return embedded == null || embedded.isActive();
    }

    /** Removes every key (between test classes). Starts the embedded server first if a test stopped it. */
    public void flushAll() {
        start();
        RedisClient client = RedisClient.create(redisUri());
        try (StatefulRedisConnection<String, String> connection = client.connect()) {
            connection.sync().flushall();
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(5));
        }
    }

    /** Stops the embedded server; its port stays reserved for {@link #start()}. */
    public void stop() {
        RedisServer server = requireEmbedded("stop");
        try {
            server.stop();
        } catch (IOException e) {
            throw new UncheckedIOException("embedded redis-server did not stop", e);
        }
    }

    /** Starts the embedded server (again) on its port; a no-op when it runs or is external. */
    public void start() {
        if (embedded == null || embedded.isActive()) {
            return;
        }
        try {
            embedded.start();
        } catch (IOException e) {
            throw new UncheckedIOException("embedded redis-server did not start on " + Urls.masked(uri), e);
        }
    }

    private RedisServer requireEmbedded(String what) {
        if (embedded == null) {
            throw new IllegalStateException("cannot " + what + " the external Redis at " + Urls.masked(uri)
                    + " (" + TestRedis.URL_ENV + "); only the embedded one");
        }
        return embedded;
    }

    @Override
    public String toString() {
        return "TestRedisServer{" + Urls.masked(uri) + (embedded != null ? ", embedded" : "") + "}";
    }
}
