package dev.durable.redis;

import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterContext;
import dev.durable.limit.LimiterFactory;
import dev.durable.redis.internal.LimiterEndpoint;
import dev.durable.redis.internal.RedisConnector;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;

/**
 * Redis limiters, for engines that share a database and a Redis:
 *
 * <pre>{@code
 * EngineOptions.builder()...gate("partner", 5).limiter(RedisLimiters.redis("redis://cache:6379"))
 * }</pre>
 *
 * Every engine that runs rows of a gate or rate limit must use the same limiter (and the same
 * limits): an engine on the PostgreSQL limiter and one on Redis would each admit up to the limit.
 * See {@link RedisLimiter} for what happens to slots, buckets and work while Redis is away.
 */
public final class RedisLimiters {

    private RedisLimiters() {
    }

    /** A client of the limiter's own per engine, for {@code uri} ({@code redis://host:port}). */
    public static LimiterFactory redis(String uri) {
        return redis(RedisConnector.parseUri(uri), RedisLimiterOptions.defaults());
    }

    /** A client of the limiter's own per engine, shut down when the engine closes. */
    public static LimiterFactory redis(RedisURI uri, RedisLimiterOptions options) {
        RedisConnector.requireNonNull("uri", uri);
        RedisConnector.requireNonNull("options", options);
        return factory("redis(" + RedisConnector.where(uri) + ", " + options + ")", options,
                () -> LimiterEndpoint.standalone(RedisConnector.owned(uri)));
    }

    /**
     * A connection to {@code uri} from the caller's client, which stays the caller's to shut down
     * (after the engines that use it closed).
     */
    public static LimiterFactory redis(RedisClient client, RedisURI uri, RedisLimiterOptions options) {
        RedisConnector.requireNonNull("client", client);
        RedisConnector.requireNonNull("uri", uri);
        RedisConnector.requireNonNull("options", options);
        return factory("redis(client, " + RedisConnector.where(uri) + ", " + options + ")", options,
                () -> LimiterEndpoint.standalone(RedisConnector.shared(client, uri)));
    }

    /**
     * A Redis Cluster, through the caller's client (which stays the caller's to shut down). Every
     * script's keys share one hash tag (a gate counter and its ledger mark, a bucket, a window
     * partition), so each runs atomically on one slot; the client's view of the slots is loaded,
     * without blocking, before it connects.
     */
    public static LimiterFactory redisCluster(RedisClusterClient client, RedisLimiterOptions options) {
        RedisConnector.requireNonNull("client", client);
        RedisConnector.requireNonNull("options", options);
        return factory("redisCluster(" + options + ")", options, () -> LimiterEndpoint.cluster(client));
    }

    private static LimiterFactory factory(String description, RedisLimiterOptions options,
            Supplier<LimiterEndpoint> endpoint) {
        return new LimiterFactory() {
            @Override
            public Mono<Limiter> create(LimiterContext context) {
                // Redis down at start does not fail the engine: it admits once Redis is back.
                return Mono.fromSupplier(() -> new RedisLimiter(endpoint.get(), context, options))
                        .flatMap(limiter -> limiter.warmUp().thenReturn(limiter));
            }

            @Override
            public String toString() {
                return description;
            }
        };
    }
}
