package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class RedisMembershipOptionsTest {

    @Test
    void defaultsKeyAndMutate() {
        RedisMembershipOptions options = RedisMembershipOptions.builder("replicas", "node-a").build();
        assertThat(options.ttl()).isEqualTo(RedisMembershipOptions.DEFAULT_TTL);
        assertThat(options.heartbeatInterval()).isEqualTo(RedisMembershipOptions.DEFAULT_HEARTBEAT_INTERVAL);
        assertThat(options.pollInterval()).isEqualTo(RedisMembershipOptions.DEFAULT_POLL_INTERVAL);
        assertThat(options.key()).isEqualTo("{durable:members:replicas}");
        RedisMembershipOptions b = options.mutate().nodeId("node-b").ttl(Duration.ofSeconds(30)).build();
        assertThat(b.nodeId()).isEqualTo("node-b");
        assertThat(b.group()).isEqualTo("replicas");
        assertThat(b.ttl()).isEqualTo(Duration.ofSeconds(30));
    }

    @Test
    void badValuesNameTheOptionAndTheRule() {
        assertThatThrownBy(() -> RedisMembershipOptions.builder("a{b}", "n"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("group must be")
                .hasMessageContaining("braces");
        assertThatThrownBy(() -> RedisMembershipOptions.builder("", "n")).hasMessageContaining("group must be");
        assertThatThrownBy(() -> RedisMembershipOptions.builder("g", " ")).hasMessageContaining("nodeId must be");
        assertThatThrownBy(() -> RedisMembershipOptions.builder("g", null)).hasMessage("nodeId must not be null");
        RedisMembershipOptions.Builder builder = RedisMembershipOptions.builder("g", "n");
        assertThatThrownBy(() -> builder.ttl(Duration.ofMillis(50))).hasMessageContaining("ttl must be at least 100 ms");
        assertThatThrownBy(() -> builder.pollInterval(Duration.ZERO)).hasMessageContaining("pollInterval must be at least");
        assertThatThrownBy(() -> builder.heartbeatInterval(Duration.ofMillis(-1)))
                .hasMessageContaining("heartbeatInterval must be at least");
        assertThatThrownBy(() -> builder.ttl(Duration.ofSeconds(6)).heartbeatInterval(Duration.ofSeconds(3)).build())
                .hasMessageContaining("ttl must be more than twice heartbeatInterval");
    }
}
