package dev.durable.redis.testing;

import dev.durable.Urls;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import org.jspecify.annotations.Nullable;
import redis.embedded.RedisServer;

/**
 * The Redis of the tests and the demo. {@code DURABLE_REDIS_URL} names a server to use
 * ({@code redis://host:port}); without it an embedded redis-server (the binary that ships in
 * {@code com.github.codemonstur:embedded-redis}) starts once per JVM on a free port and stops with
 * it. Blocking by design: call it from tests and {@code main}, never from a reactive thread.
 */
public final class TestRedis {

    /** The environment variable naming a server to use instead of the embedded one. */
    public static final String URL_ENV = "DURABLE_REDIS_URL";

    private static @Nullable TestRedisServer server;

    private TestRedis() {
    }

    /** The shared server, starting the embedded one on first use. */
    public static synchronized TestRedisServer server() {
        if (server == null) {
            String fromEnv = System.getenv(URL_ENV);
            server = fromEnv != null && !fromEnv.isBlank() ? TestRedisServer.external(checkUrl(fromEnv.strip()))
                    : startEmbedded();
        }
        return server;
    }

    /** The URI of the shared server ({@code redis://host:port}). */
    public static String uri() {
        return server().uri();
    }

    /** The URL when usable; else an error that shows it masked (the parser's own quotes it whole). */
    static String checkUrl(String url) {
        URI parsed;
        try {
            parsed = URI.create(url);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(URL_ENV + " must be a redis:// URL, was '" + Urls.masked(url) + "' ("
                    + Urls.maskedIn(e.getMessage(), url) + ")");
        }
        if (!"redis".equals(parsed.getScheme()) && !"rediss".equals(parsed.getScheme())) {
            throw new IllegalArgumentException(URL_ENV + " must be a redis:// (or rediss://) URL, was '"
                    + Urls.masked(url) + "'");
        }
        if (parsed.getHost() == null) {
            throw new IllegalArgumentException(URL_ENV + " must name a host, was '" + Urls.masked(url) + "'");
        }
        return url;
    }

    private static TestRedisServer startEmbedded() {
        int port = freePort();
        RedisServer redis;
        try {
            redis = RedisServer.newRedisServer()
                    .port(port)
                    .bind("127.0.0.1")
                    // A test server: no snapshots on disk, so a restart starts empty and fast.
                    .setting("save \"\"")
                    .setting("appendonly no")
                    // Keep the default log level: the launcher waits for the "ready" line. Drain the
                    // output after it, or a full pipe would stall the server.
                    .soutListener(line -> { })
                    .serrListener(line -> { })
                    .build();
        } catch (IOException e) {
            throw new UncheckedIOException("embedded redis-server could not be prepared", e);
        }
        TestRedisServer started = TestRedisServer.embedded(redis, port);
        started.start();
        Runtime.getRuntime().addShutdownHook(new Thread(started::stop, "embedded-redis-stop"));
        return started;
    }

    private static int freePort() {
        try (ServerSocket socket = new ServerSocket(0)) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("no free port for the embedded redis-server", e);
        }
    }
}
