package dev.durable.redis;

import dev.durable.limit.LimiterUnderTest;
import dev.durable.limit.StackedLimitsContract;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The limiter contract's stacked limits on the Redis limiter, which takes a claim's gate slot, then
 * its window count, then its tokens, and gives back what a later limit refused.
 */
@ExtendWith(RedisExtension.class)
class RedisStackedLimitsIT extends StackedLimitsContract {

    private TestRedisServer redis;

    @BeforeEach
    void onRedis(TestRedisServer server) {
        redis = server;
    }

    /** The limiter under test; {@code RedisClusterStackedLimitsIT} runs these cases on a Redis Cluster. */
    RedisUnderTest redisLimiter() {
        return RedisUnderTest.standalone(redis, db);
    }

    @Override
    protected LimiterUnderTest limiter() {
        return redisLimiter();
    }
}
