package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.lettuce.core.RedisURI;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class RedisLimiterOptionsTest {

    @Test
    void defaults() {
        RedisLimiterOptions options = RedisLimiterOptions.defaults();
        assertThat(options.keyPrefix()).isEqualTo(RedisLimiterOptions.DEFAULT_KEY_PREFIX);
        assertThat(options.commandTimeout()).isEqualTo(RedisLimiterOptions.DEFAULT_COMMAND_TIMEOUT);
        assertThat(options.mutate().build().toString()).isEqualTo(options.toString());
    }

    @Test
    void aBadKeyPrefixIsRefusedByName() {
        for (String bad : new String[] {"", "a b", "a{b", "a}b", "x".repeat(129)}) {
            assertThatThrownBy(() -> RedisLimiterOptions.builder().keyPrefix(bad))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("keyPrefix");
        }
        assertThatThrownBy(() -> RedisLimiterOptions.builder().keyPrefix(null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("keyPrefix must not be null");
    }

    @Test
    void aBadCommandTimeoutIsRefusedByName() {
        for (Duration bad : new Duration[] {Duration.ZERO, Duration.ofMillis(-1), Duration.ofSeconds(31)}) {
            assertThatThrownBy(() -> RedisLimiterOptions.builder().commandTimeout(bad))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("commandTimeout");
        }
        assertThat(RedisLimiterOptions.builder().commandTimeout(Duration.ofMillis(200)).build().commandTimeout())
                .isEqualTo(Duration.ofMillis(200));
    }

    @Test
    void theFactoriesRefuseMissingArgumentsByName() {
        assertThatThrownBy(() -> RedisLimiters.redis((String) null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("uri");
        assertThatThrownBy(() -> RedisLimiters.redis(RedisURI.create("redis://localhost:6379"), null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("options");
        assertThat(RedisLimiters.redis("redis://localhost:6379").toString()).contains("localhost:6379");
        assertThatThrownBy(() -> RedisLimiters.redisCluster(null, RedisLimiterOptions.defaults()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("client");
    }
}
