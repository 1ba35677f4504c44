package dev.durable.redis;

import dev.durable.limit.LimiterFactory;
import dev.durable.redis.testing.RedisClusterExtension;
import dev.durable.redis.testing.TestRedisCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link RedisFairnessIT}'s cases on a real Redis Cluster of three masters: weights and per-key caps. */
@ExtendWith(RedisClusterExtension.class)
class RedisClusterFairnessIT extends RedisFairnessIT {

    @BeforeAll
    static void connect(TestRedisCluster cluster) {
        RedisClusterLimits.connect(cluster);
    }

    @AfterAll
    static void shutdown() {
        RedisClusterLimits.shutdown();
    }

    @Override
    LimiterFactory limiter() {
        return RedisClusterLimits.limiter();
    }
}
