package dev.durable.redis;

import dev.durable.poke.PokeContext;
import dev.durable.poke.PokeTransport;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.redis.internal.LettucePokeTransport;
import dev.durable.redis.internal.RedisConnector;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;

/**
 * Poke transports over Redis pub/sub, for engines that share a database and a Redis:
 *
 * <pre>{@code
 * EngineOptions.builder()...pokeTransport(RedisPokeTransports.redis("redis://cache:6379"))
 * }</pre>
 *
 * Each engine gets one dedicated pub/sub connection and one connection to publish on. Its own pokes
 * reach its schedulers at once; other engines on the same schema hear them within milliseconds.
 * Polling remains the floor: while Redis is down pokes between engines are lost (logged once), and
 * nothing fails. Pokes made inside a caller's transaction ({@code insert(connection, ...)}) go out
 * before the commit; call {@code engine.poke(queue)} after committing for a prompt remote pick.
 */
public final class RedisPokeTransports {

    private RedisPokeTransports() {
    }

    /** A client of the transport's own per engine, for {@code uri} ({@code redis://host:port}). */
    public static PokeTransportFactory redis(String uri) {
        return redis(RedisConnector.parseUri(uri), RedisPokeOptions.defaults());
    }

    /** A client of the transport's own per engine, shut down when the engine closes. */
    public static PokeTransportFactory redis(RedisURI uri) {
        return redis(uri, RedisPokeOptions.defaults());
    }

    /** A client of the transport's own per engine, shut down when the engine closes. */
    public static PokeTransportFactory redis(RedisURI uri, RedisPokeOptions options) {
        RedisConnector.requireNonNull("uri", uri);
        RedisConnector.requireNonNull("options", options);
        return factory("redis(" + RedisConnector.where(uri) + ", " + options + ")", options,
                () -> RedisConnector.owned(uri));
    }

    /**
     * Connections to {@code uri} from the caller's client, which stays the caller's to shut down
     * (after the engines that use it closed).
     */
    public static PokeTransportFactory redis(RedisClient client, RedisURI uri) {
        return redis(client, uri, RedisPokeOptions.defaults());
    }

    /** Connections from the caller's client, with these options. */
    public static PokeTransportFactory redis(RedisClient client, RedisURI uri, RedisPokeOptions options) {
        RedisConnector.requireNonNull("client", client);
        RedisConnector.requireNonNull("uri", uri);
        RedisConnector.requireNonNull("options", options);
        return factory("redis(client, " + RedisConnector.where(uri) + ", " + options + ")", options,
                () -> RedisConnector.shared(client, uri));
    }

    private static PokeTransportFactory factory(String description, RedisPokeOptions options,
            Supplier<RedisConnector> connector) {
        return new PokeTransportFactory() {
            @Override
            public Mono<PokeTransport> create(PokeContext context) {
                return Mono.fromSupplier(connector)
                        .flatMap(made -> LettucePokeTransport.start(made, context, options))
                        .cast(PokeTransport.class);
            }

            @Override
            public String toString() {
                return description;
            }
        };
    }
}
