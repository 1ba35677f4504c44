package dev.durable.redis;

import dev.durable.limit.LimiterFactory;
import dev.durable.redis.testing.TestRedisCluster;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/** The cluster client the RedisCluster* test classes share, one per class, shut down after it. */
final class RedisClusterLimits {

    private static @Nullable RedisClusterClient client;

    private RedisClusterLimits() {
    }

    static synchronized void connect(TestRedisCluster cluster) {
        client = cluster.client();
    }

    static synchronized LimiterFactory limiter() {
        if (client == null) {
            throw new IllegalStateException("connect first");
        }
        return RedisLimiters.redisCluster(client, RedisLimiterOptions.defaults());
    }

    static synchronized void shutdown() {
        if (client != null) {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(5));
            client = null;
        }
    }
}
