package dev.durable.redis;

import dev.durable.redis.internal.LettuceMembership;
import dev.durable.redis.internal.RedisConnector;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import reactor.core.publisher.Mono;

/**
 * Memberships of a group of nodes registered in Redis ({@link RedisMembership}), a membership source
 * for the sync scheduler:
 *
 * <pre>{@code
 * RedisMembership membership = RedisMemberships.join(RedisURI.create("redis://cache:6379"),
 *         RedisMembershipOptions.builder("replicas", "node-a").build()).block();
 * }</pre>
 */
public final class RedisMemberships {

    private RedisMemberships() {
    }

    /**
     * Registers this node with a client of its own for {@code uri}, shut down on {@link RedisMembership#close()}.
     * Signals {@link RedisUnavailableException} when Redis cannot be reached for the first
     * registration; after that, outages only delay heartbeats (logged once).
     */
    public static Mono<RedisMembership> join(RedisURI uri, RedisMembershipOptions options) {
        RedisConnector.requireNonNull("uri", uri);
        RedisConnector.requireNonNull("options", options);
        return Mono.fromSupplier(() -> RedisConnector.owned(uri))
                .flatMap(connector -> LettuceMembership.join(connector, options));
    }

    /** Registers this node with connections from the caller's client, which stays the caller's. */
    public static Mono<RedisMembership> join(RedisClient client, RedisURI uri, RedisMembershipOptions options) {
        RedisConnector.requireNonNull("client", client);
        RedisConnector.requireNonNull("uri", uri);
        RedisConnector.requireNonNull("options", options);
        return LettuceMembership.join(RedisConnector.shared(client, uri), options);
    }
}
