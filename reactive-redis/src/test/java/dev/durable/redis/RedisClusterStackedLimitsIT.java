package dev.durable.redis;

import dev.durable.redis.testing.RedisClusterExtension;
import dev.durable.redis.testing.TestRedisCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link RedisStackedLimitsIT}'s cases on a real Redis Cluster of three masters: a row's limits admitted all or nothing (gate, bucket, window) when their keys sit on different masters. */
@ExtendWith(RedisClusterExtension.class)
class RedisClusterStackedLimitsIT extends RedisStackedLimitsIT {

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
