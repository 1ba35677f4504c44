package dev.durable.redis;

import dev.durable.limit.LimiterUnderTest;
import dev.durable.limit.PermitsContract;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The limiter contract's permits on the Redis limiter, where a permit's slots are members of its
 * gate's counter, scored by their lease, and expire by themselves.
 */
@ExtendWith(RedisExtension.class)
class RedisPermitsIT extends PermitsContract {

    private TestRedisServer redis;

    @BeforeEach
    void onRedis(TestRedisServer server) {
        redis = server;
    }

    /** The limiter under test; {@code RedisClusterPermitsIT} runs these cases on a Redis Cluster. */
    RedisUnderTest redisLimiter() {
        return RedisUnderTest.standalone(redis, db);
    }

    @Override
    protected LimiterUnderTest limiter() {
        return redisLimiter();
    }
}
