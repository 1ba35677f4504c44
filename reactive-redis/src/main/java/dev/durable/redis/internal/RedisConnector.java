package dev.durable.redis.internal;

import dev.durable.Urls;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.time.Duration;
import reactor.core.publisher.Mono;

/**
 * Where a component's Redis connections come from: a client and the URI to connect to. A client
 * the caller gave stays the caller's; a client made here from a URI is shut down on {@link #close()}.
 */
public final class RedisConnector {

    private static final String URI_RULE = "uri must be a Redis URI (redis://[[user]:password@]host[:port][/database])";

    private final RedisClient client;
    private final RedisURI uri;
    private final boolean owned;

    private RedisConnector(RedisClient client, RedisURI uri, boolean owned) {
        this.client = client;
        this.uri = uri;
        this.owned = owned;
    }

    /**
     * A Redis URI from text. A malformed one is refused with its secrets masked and without the
     * parser's exception, whose message quotes the URI whole. So is one that Lettuce reads into a
     * host no server can have: an unencoded {@code ?} or {@code /} in a password moves part of it
     * into the host, which the factories' descriptions and the logs would print.
     */
    public static RedisURI parseUri(String uri) {
        requireNonNull("uri", uri);
        RedisURI parsed;
        try {
            parsed = RedisURI.create(uri);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(URI_RULE + ", was " + Urls.masked(uri) + " ("
                    + Urls.maskedIn(e.getMessage(), uri) + ")");
        }
        if (parsed.getHost() != null && !isHost(parsed.getHost())) {
            throw new IllegalArgumentException(URI_RULE + " (percent-encode reserved characters in a password), was "
                    + Urls.masked(uri));
        }
        return parsed;
    }

    /** The argument check of the Redis factories and options: the message names the option. */
    public static void requireNonNull(String option, @org.jspecify.annotations.Nullable Object value) {
        if (value == null) {
            throw new IllegalArgumentException(option + " must not be null");
        }
    }

    /** Connections from the caller's client, which the caller shuts down. */
    public static RedisConnector shared(RedisClient client, RedisURI uri) {
        return new RedisConnector(client, uri, false);
    }

    /**
     * A client of our own for {@code uri}. While Redis is down its commands fail at once instead of
     * queueing for a reconnect: a poke or a heartbeat from before the outage is worthless after it.
     */
    public static RedisConnector owned(RedisURI uri) {
        RedisClient client = RedisClient.create(uri);
        client.setOptions(ClientOptions.builder()
                .autoReconnect(true)
                .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                .timeoutOptions(TimeoutOptions.enabled(Duration.ofSeconds(5)))
                .build());
        return new RedisConnector(client, uri, true);
    }

    public RedisURI uri() {
        return uri;
    }

    public Mono<StatefulRedisConnection<String, String>> connect() {
        return Mono.fromCompletionStage(() -> client.connectAsync(StringCodec.UTF8, uri));
    }

    public Mono<StatefulRedisPubSubConnection<String, String>> connectPubSub() {
        return Mono.fromCompletionStage(() -> client.connectPubSubAsync(StringCodec.UTF8, uri));
    }

    /** Shuts the client down when it is ours; the caller's stays open. */
    public Mono<Void> close() {
        return owned ? Mono.fromCompletionStage(client::shutdownAsync) : Mono.empty();
    }

    /** Where Redis is, for messages: host and port only, never credentials. */
    public String where() {
        return where(uri);
    }

    /**
     * Where {@code uri} points, for messages and descriptions: host and port only, never
     * credentials; a host that no server can have (a password's tail, misread) is masked.
     */
    public static String where(RedisURI uri) {
        String host = uri.getHost();
        return (host == null || isHost(host) ? host : "****") + ":" + uri.getPort();
    }

    /** A DNS name, an IPv4 address or an IPv6 one (two colons at least). */
    private static boolean isHost(String host) {
        int colons = 0;
        for (int i = 0; i < host.length(); i++) {
            char c = host.charAt(i);
            if (c == ':') {
                colons++;
            } else if (!Character.isLetterOrDigit(c) && "._~%-[]".indexOf(c) < 0) {
                return false;
            }
        }
        return colons == 0 || colons >= 2;
    }
}
