package dev.durable.redis;

import dev.durable.redis.testing.RedisClusterExtension;
import dev.durable.redis.testing.TestRedisCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link RedisPermitsIT}'s cases on a real Redis Cluster of three masters: engine.limits() permits (acquire, tryAcquire, release, lease expiry, tokens, windows). */
@ExtendWith(RedisClusterExtension.class)
class RedisClusterPermitsIT extends RedisPermitsIT {

    private TestRedisCluster cluster;

    @BeforeAll
    static void connect(TestRedisCluster cluster) {
        RedisClusterLimits.connect(cluster);
    }

    @AfterAll
    static void shutdown() {
        RedisClusterLimits.shutdown();
    }

    @BeforeEach
    void onCluster(TestRedisCluster cluster) {
        this.cluster = cluster;
    }

    @Override
    RedisUnderTest redisLimiter() {
        return RedisUnderTest.cluster(cluster, db);
    }
}
