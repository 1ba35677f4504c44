package dev.durable.redis.internal;

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

    private final RedisClient client;
    private final RedisURI uri;
    private final boolean owned;

    private RedisConnector(RedisClient client, RedisURI uri, boolean owned) {
        this.client = client;
        this.uri = uri;
        this.owned = owned;
    }

    /** A Redis URI from text; a malformed one is refused without echoing it (it may hold a password). */
    public static RedisURI parseUri(String uri) {
        requireNonNull("uri", uri);
        try {
            return RedisURI.create(uri);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("uri must be a Redis URI (redis://host:port)", e);
        }
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
        return uri.getHost() + ":" + uri.getPort();
    }
}
