package dev.durable.redis.internal;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import io.lettuce.core.codec.StringCodec;
import java.util.function.Function;
import reactor.core.publisher.Mono;

/**
 * Where the limiter's scripts run: one standalone Redis or a Redis Cluster. The limiter only needs
 * a connection, its scripting and key commands and a way to shut down what it owns; a cluster
 * connection routes each script by its keys' hash slot, and its SCAN walks every master.
 */
public record LimiterEndpoint(Mono<? extends StatefulConnection<String, String>> connect,
        Function<StatefulConnection<String, String>, RedisClusterReactiveCommands<String, String>> commands,
        Mono<Void> shutdown, String where) {

    /** One Redis, through a connector (the caller's client or one of our own). */
    @SuppressWarnings("unchecked")
    public static LimiterEndpoint standalone(RedisConnector connector) {
        return new LimiterEndpoint(connector.connect(),
                connection -> ((StatefulRedisConnection<String, String>) connection).reactive(),
                Mono.defer(connector::close), connector.where());
    }

    /**
     * A Redis Cluster through the caller's client, which stays the caller's to shut down. The
     * client's view of the slots is loaded first, without blocking: a fresh client's
     * {@code connectAsync} refuses to connect before it has one (only its blocking
     * {@code connect} loads it on its own).
     */
    @SuppressWarnings("unchecked")
    public static LimiterEndpoint cluster(RedisClusterClient client) {
        return new LimiterEndpoint(Mono.fromCompletionStage(client::refreshPartitionsAsync)
                .then(Mono.fromCompletionStage(() -> client.connectAsync(StringCodec.UTF8))),
                connection -> ((StatefulRedisClusterConnection<String, String>) connection).reactive(),
                Mono.empty(), "cluster");
    }
}
