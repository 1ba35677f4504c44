package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class RedisPokeOptionsTest {

    @Test
    void defaultsAndMutate() {
        RedisPokeOptions defaults = RedisPokeOptions.defaults();
        assertThat(defaults.channelPrefix()).isEqualTo(RedisPokeOptions.DEFAULT_CHANNEL_PREFIX);
        assertThat(defaults.coalesceWindow()).isEqualTo(RedisPokeOptions.DEFAULT_COALESCE_WINDOW);
        RedisPokeOptions changed = defaults.mutate().channelPrefix("app1:poke:").coalesceWindow(Duration.ZERO).build();
        assertThat(changed.channelPrefix()).isEqualTo("app1:poke:");
        assertThat(changed.coalesceWindow()).isZero();
        assertThat(defaults.channelPrefix()).isEqualTo(RedisPokeOptions.DEFAULT_CHANNEL_PREFIX);
    }

    @Test
    void badValuesNameTheOptionAndTheRule() {
        RedisPokeOptions.Builder builder = RedisPokeOptions.builder();
        assertThatThrownBy(() -> builder.channelPrefix("")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("channelPrefix must be 1 to 128 characters");
        assertThatThrownBy(() -> builder.channelPrefix("a b")).hasMessageContaining("without white space");
        assertThatThrownBy(() -> builder.channelPrefix(null)).hasMessage("channelPrefix must not be null");
        assertThatThrownBy(() -> builder.coalesceWindow(Duration.ofMillis(-1)))
                .hasMessageContaining("coalesceWindow must be between 0 and PT1S");
        assertThatThrownBy(() -> builder.coalesceWindow(Duration.ofSeconds(2))).hasMessageContaining("coalesceWindow");
    }

    @Test
    void factoriesCheckTheirArguments() {
        assertThatThrownBy(() -> RedisPokeTransports.redis((String) null)).hasMessage("uri must not be null");
        assertThatThrownBy(() -> RedisPokeTransports.redis("not a uri")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("uri must be a Redis URI");
        assertThat(RedisPokeTransports.redis("redis://localhost:6379").toString()).contains("localhost:6379");
    }
}
