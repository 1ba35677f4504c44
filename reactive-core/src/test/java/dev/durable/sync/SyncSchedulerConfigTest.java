package dev.durable.sync;

import static dev.durable.sync.SyncTopologyTest.assertRule;
import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.sync.SyncConfigException.Rule;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

class SyncSchedulerConfigTest {

    private static SyncSchedulerConfig.Builder valid() {
        return SyncSchedulerConfig.builder("1").nodes(List.of("0", "1", "2", "3"))
                .topology(SyncTopology.ring()).shardCount(2).interval(Duration.ofSeconds(10));
    }

    @Test
    void aValidConfigKnowsItsPartners() {
        SyncSchedulerConfig config = valid().build();
        assertThat(config.partners()).containsExactly("0", "2");
        assertThat(config.shardCount()).isEqualTo(2);
        assertThat(config.maxConcurrency()).isEqualTo(SyncSchedulerConfig.DEFAULT_MAX_CONCURRENCY);
    }

    @Test
    void noShards() {
        assertRule(() -> valid().shardCount(0), Rule.ZERO_SHARDS, "shardCount must be at least 1, was 0");
        assertRule(() -> SyncSchedulerConfig.builder("1").nodes(List.of("1")).topology(SyncTopology.ring())
                .interval(Duration.ofSeconds(1)).build(), Rule.ZERO_SHARDS, "was 0");
    }

    @Test
    void zeroOrNegativeInterval() {
        assertRule(() -> valid().interval(Duration.ZERO), Rule.NON_POSITIVE_INTERVAL, "PT0S");
        assertRule(() -> valid().interval(Duration.ofSeconds(-1)), Rule.NON_POSITIVE_INTERVAL, "PT-1S");
        assertRule(() -> SyncSchedulerConfig.builder("1").nodes(List.of("1")).topology(SyncTopology.ring())
                .shardCount(1).build(), Rule.NON_POSITIVE_INTERVAL, "interval must be set");
    }

    @Test
    void topologyIsExplicit() {
        assertRule(() -> SyncSchedulerConfig.builder("1").nodes(List.of("1")).shardCount(1)
                .interval(Duration.ofSeconds(1)).build(), Rule.NO_TOPOLOGY, "no default");
    }

    @Test
    void topologyErrorsSurfaceAtBuild() {
        assertRule(() -> valid().nodes(List.of("0", "1", "0")), Rule.DUPLICATE_NODE, "'0'");
        assertRule(() -> valid().topology(SyncTopology.custom(NodePair.of("1", "9"))).build(),
                Rule.UNKNOWN_ENDPOINT, "'9'");
        assertRule(() -> valid().nodes(List.of("0", "2")).build(), Rule.LOCAL_NODE_NOT_IN_SET, "'1'");
    }

    @Test
    void exactlyOneNodeSource() {
        assertRule(() -> SyncSchedulerConfig.builder("1").topology(SyncTopology.ring()).shardCount(1)
                .interval(Duration.ofSeconds(1)).build(), Rule.NO_NODE_SET, "exactly one");
        assertRule(() -> valid().membership(Flux.<Set<String>>empty()).build(), Rule.NO_NODE_SET, "exactly one");
        SyncSchedulerConfig dynamic = SyncSchedulerConfig.builder("1").membership(Flux.never())
                .topology(SyncTopology.ring()).shardCount(1).interval(Duration.ofSeconds(1)).build();
        assertRule(dynamic::partners, Rule.NO_NODE_SET, "per tick");
    }

    @Test
    void pacingAndJitterRanges() {
        assertRule(() -> valid().maxConcurrency(0), Rule.INVALID_OPTION, "maxConcurrency must be at least 1, was 0");
        assertRule(() -> valid().maxConcurrency(2).maxConcurrencyPerPartner(3).build(), Rule.INVALID_OPTION,
                "maxConcurrencyPerPartner must be at most maxConcurrency, was 3 > 2");
        assertRule(() -> valid().jitter(Duration.ofSeconds(11)).build(), Rule.INVALID_OPTION, "jitter must be at most");
        assertRule(() -> valid().jitter(Duration.ofSeconds(-1)), Rule.INVALID_OPTION, "negative");
        assertRule(() -> valid().pullTimeout(Duration.ZERO), Rule.INVALID_OPTION, "pullTimeout");
        assertRule(() -> valid().maxBackoffTicks(-1), Rule.INVALID_OPTION, "maxBackoffTicks");
        assertRule(() -> SyncSchedulerConfig.builder(""), Rule.BLANK_NODE, "localNode");
    }
}
