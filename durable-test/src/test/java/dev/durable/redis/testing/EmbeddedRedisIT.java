package dev.durable.redis.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The test Redis itself: reachable, emptied by flushAll, and (embedded) restartable on its port. */
@ExtendWith(RedisExtension.class)
class EmbeddedRedisIT {

    private static <T> T withRedis(TestRedisServer redis, Function<StatefulRedisConnection<String, String>, T> work) {
        RedisClient client = RedisClient.create(redis.redisUri());
        try (StatefulRedisConnection<String, String> connection = client.connect()) {
            return work.apply(connection);
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(5));
        }
    }

    @Test
    void answersAndFlushAllEmptiesIt(TestRedisServer redis) {
        assertThat(TestRedis.server()).isSameAs(redis);
        String set = withRedis(redis, c -> c.sync().set("test-redis:k", "v"));
        assertThat(set).isEqualTo("OK");
        redis.flushAll();
        Long exists = withRedis(redis, c -> c.sync().exists("test-redis:k"));
        assertThat(exists).isZero();
    }

    @Test
    void theEmbeddedServerStopsAndStartsAgainOnTheSamePort(TestRedisServer redis) {
        assumeTrue(redis.isEmbedded(), "only the embedded server can be stopped");
        String before = redis.uri();
        redis.stop();
        assertThat(redis.isRunning()).isFalse();
        redis.start();
        assertThat(redis.uri()).isEqualTo(before);
        String pong = withRedis(redis, c -> c.sync().ping());
        assertThat(pong).isEqualTo("PONG");
    }
}
