package dev.durable.redis.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.List;
import org.junit.jupiter.api.Test;

class TestRedisTest {

    @Test
    void acceptsRedisUrlsAndNamesTheVariableOtherwise() {
        assertThat(TestRedis.checkUrl("redis://localhost:6379")).isEqualTo("redis://localhost:6379");
        assertThat(TestRedis.checkUrl("rediss://cache.internal:6380/0")).isEqualTo("rediss://cache.internal:6380/0");
        assertThatThrownBy(() -> TestRedis.checkUrl("http://localhost:6379")).hasMessageContaining(TestRedis.URL_ENV);
        assertThatThrownBy(() -> TestRedis.checkUrl("redis:///0")).hasMessageContaining("host");
    }

    @Test
    void aPasswordInTheVariableReachesNoErrorAndNoToString() {
        for (String url : List.of("redis://:pA55 wOrD@cache:6379", "http://:pA55wOrD@cache", "redis://:pA55wOrD@/0")) {
            Throwable error = catchThrowable(() -> TestRedis.checkUrl(url));
            assertThat(error).as(url).isInstanceOf(IllegalArgumentException.class).hasNoCause();
            assertThat(error.getMessage()).as(url).contains(TestRedis.URL_ENV)
                    .doesNotContain("pA55").doesNotContain("wOrD");
        }
        TestRedisServer external = TestRedisServer.external("redis://app:pA55@wOrD@cache:6379");
        assertThat(external.toString()).doesNotContain("pA55").doesNotContain("wOrD").contains("cache:6379");
        assertThatThrownBy(external::stop).isInstanceOf(IllegalStateException.class)
                .message().doesNotContain("pA55").doesNotContain("wOrD");
    }
}
