package dev.durable.redis.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class TestRedisTest {

    @Test
    void acceptsRedisUrlsAndNamesTheVariableOtherwise() {
        assertThat(TestRedis.checkUrl("redis://localhost:6379")).isEqualTo("redis://localhost:6379");
        assertThat(TestRedis.checkUrl("rediss://cache.internal:6380/0")).isEqualTo("rediss://cache.internal:6380/0");
        assertThatThrownBy(() -> TestRedis.checkUrl("http://localhost:6379")).hasMessageContaining(TestRedis.URL_ENV);
        assertThatThrownBy(() -> TestRedis.checkUrl("redis:///0")).hasMessageContaining("host");
    }
}
