package dev.durable.sync;

import dev.durable.sync.SyncConfigException.Rule;
import dev.durable.sync.internal.PairGraph;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Everything a {@link SyncScheduler} is configured with. Immutable, built once with
 * {@link #builder(String)}: each setter checks its own argument, {@link Builder#build()} the rules
 * across them (local node in the set, the topology's own rules), and a broken value throws
 * {@link SyncConfigException} naming the option, the rule and the value.
 *
 * <pre>{@code
 * SyncSchedulerConfig.builder("node-b")
 *     .nodes(List.of("node-a", "node-b", "node-c"))
 *     .topology(SyncTopology.ring())
 *     .shardCount(16)
 *     .interval(Duration.ofSeconds(30))
 *     .jitter(Duration.ofSeconds(5))
 *     .build();
 * }</pre>
 */
public final class SyncSchedulerConfig {

    public static final int DEFAULT_MAX_CONCURRENCY = 4;
    public static final int DEFAULT_MAX_CONCURRENCY_PER_PARTNER = 1;
    public static final Duration DEFAULT_PULL_TIMEOUT = Duration.ofSeconds(30);
    public static final int DEFAULT_MAX_BACKOFF_TICKS = 16;

    private final String localNode;
    private final List<String> nodes;
    private final @Nullable Flux<Set<String>> membership;
    private final SyncTopology topology;
    private final int shardCount;
    private final ShardSource shardSource;
    private final Duration interval;
    private final Duration jitter;
    private final Random random;
    private final int maxConcurrency;
    private final int maxConcurrencyPerPartner;
    private final Duration pullTimeout;
    private final int maxBackoffTicks;
    private final Scheduler scheduler;
    private final @Nullable MeterRegistry meterRegistry;

    private SyncSchedulerConfig(Builder b, SyncTopology topology) {
        this.localNode = b.localNode;
        this.nodes = b.nodes;
        this.membership = b.membership;
        this.topology = topology;
        this.shardCount = b.shardCount;
        this.shardSource = b.shardSource;
        this.interval = b.interval;
        this.jitter = b.jitter;
        this.random = b.random;
        this.maxConcurrency = b.maxConcurrency;
        this.maxConcurrencyPerPartner = b.maxConcurrencyPerPartner;
        this.pullTimeout = b.pullTimeout;
        this.maxBackoffTicks = b.maxBackoffTicks;
        this.scheduler = b.scheduler;
        this.meterRegistry = b.meterRegistry;
    }

    /** A builder for the scheduler of {@code localNode}. */
    public static Builder builder(String localNode) {
        return new Builder(localNode);
    }

    public String localNode() {
        return localNode;
    }

    /** The static node set, in the order that shapes rings and gossip; empty with membership. */
    public List<String> nodes() {
        return nodes;
    }

    /** The membership source, when the node set changes at run time. */
    public @Nullable Flux<Set<String>> membership() {
        return membership;
    }

    public SyncTopology topology() {
        return topology;
    }

    public int shardCount() {
        return shardCount;
    }

    public ShardSource shardSource() {
        return shardSource;
    }

    public Duration interval() {
        return interval;
    }

    public Duration jitter() {
        return jitter;
    }

    public Random random() {
        return random;
    }

    public int maxConcurrency() {
        return maxConcurrency;
    }

    public int maxConcurrencyPerPartner() {
        return maxConcurrencyPerPartner;
    }

    public Duration pullTimeout() {
        return pullTimeout;
    }

    public int maxBackoffTicks() {
        return maxBackoffTicks;
    }

    public Scheduler scheduler() {
        return scheduler;
    }

    public @Nullable MeterRegistry meterRegistry() {
        return meterRegistry;
    }

    /**
     * The local node's partners in the static node set (round 0); with membership the partners are
     * known only per tick, and this is a {@link Rule#NO_NODE_SET} error.
     */
    public List<String> partners() {
        if (membership != null) {
            throw new SyncConfigException(Rule.NO_NODE_SET,
                    "the node set comes from membership: partners are known per tick, not up front");
        }
        return topology.partners(localNode, nodes);
    }

    @Override
    public String toString() {
        return "SyncSchedulerConfig{localNode=" + localNode
                + (membership != null ? ", membership" : ", nodes=" + nodes) + ", topology=" + topology
                + ", shardCount=" + shardCount + ", interval=" + interval + ", jitter=" + jitter
                + ", maxConcurrency=" + maxConcurrency + ", maxConcurrencyPerPartner=" + maxConcurrencyPerPartner
                + ", pullTimeout=" + pullTimeout + ", maxBackoffTicks=" + maxBackoffTicks + "}";
    }

    /** Collects the options; see {@link SyncSchedulerConfig}. */
    public static final class Builder {

        private final String localNode;
        private List<String> nodes = List.of();
        private boolean nodesSet;
        private @Nullable Flux<Set<String>> membership;
        private @Nullable SyncTopology topology;
        private int shardCount;
        private ShardSource shardSource = ShardSource.all();
        private @Nullable Duration interval;
        private Duration jitter = Duration.ZERO;
        private Random random = new Random();
        private int maxConcurrency = DEFAULT_MAX_CONCURRENCY;
        private int maxConcurrencyPerPartner = DEFAULT_MAX_CONCURRENCY_PER_PARTNER;
        private Duration pullTimeout = DEFAULT_PULL_TIMEOUT;
        private int maxBackoffTicks = DEFAULT_MAX_BACKOFF_TICKS;
        private Scheduler scheduler = Schedulers.parallel();
        private @Nullable MeterRegistry meterRegistry;

        private Builder(String localNode) {
            if (localNode == null || localNode.isBlank()) {
                throw new SyncConfigException(Rule.BLANK_NODE, "localNode must not be blank, was "
                        + (localNode == null ? "null" : "'" + localNode + "'"));
            }
            this.localNode = localNode;
        }

        /** A static node set; its order shapes rings and gossip, so give every node the same order. */
        public Builder nodes(Collection<String> nodes) {
            this.nodes = PairGraph.checkNodes(nodes);
            this.nodesSet = true;
            return this;
        }

        /**
         * A node set that changes at run time: each tick uses the latest set, sorted so every node
         * sees the same order; a tick before the first set, or whose set lacks the local node, is
         * skipped and counted. Custom pairs to nodes not in the current set are idle.
         */
        public Builder membership(Flux<Set<String>> membership) {
            this.membership = requireNonNull("membership", membership);
            return this;
        }

        /** Who syncs with whom; required, there is no default. */
        public Builder topology(SyncTopology topology) {
            this.topology = requireNonNull("topology", topology);
            return this;
        }

        /** The number of shards, numbered {@code 0..shardCount-1}; at least 1. */
        public Builder shardCount(int shardCount) {
            if (shardCount < 1) {
                throw new SyncConfigException(Rule.ZERO_SHARDS, "shardCount must be at least 1, was " + shardCount);
            }
            this.shardCount = shardCount;
            return this;
        }

        /** Which shards each pass pulls; all of them by default. */
        public Builder shardSource(ShardSource shardSource) {
            this.shardSource = requireNonNull("shardSource", shardSource);
            return this;
        }

        /** The time from the end of one pass to the next tick; positive. */
        public Builder interval(Duration interval) {
            requireNonNull("interval", interval);
            if (interval.isZero() || interval.isNegative()) {
                throw new SyncConfigException(Rule.NON_POSITIVE_INTERVAL, "interval must be positive, was " + interval);
            }
            this.interval = interval;
            return this;
        }

        /**
         * Each delay is shortened by a random amount below {@code jitter} (at most the interval),
         * so nodes started together drift apart instead of pulling in lock-step; with
         * {@code jitter == interval} the first tick lands anywhere within the first interval.
         * Zero (the default) turns it off.
         */
        public Builder jitter(Duration jitter) {
            requireNonNull("jitter", jitter);
            if (jitter.isNegative()) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "jitter must not be negative, was " + jitter);
            }
            this.jitter = jitter;
            return this;
        }

        /** Where jitter comes from (a seeded one makes it reproducible in tests). */
        public Builder random(Random random) {
            this.random = requireNonNull("random", random);
            return this;
        }

        /** The most pulls of one pass in flight at once, over all partners. */
        public Builder maxConcurrency(int maxConcurrency) {
            this.maxConcurrency = requireAtLeast("maxConcurrency", maxConcurrency, 1);
            return this;
        }

        /** The most pulls from one partner in flight at once. */
        public Builder maxConcurrencyPerPartner(int maxConcurrencyPerPartner) {
            this.maxConcurrencyPerPartner = requireAtLeast("maxConcurrencyPerPartner", maxConcurrencyPerPartner, 1);
            return this;
        }

        /** A trigger that has not completed after this long counts as a failed pull. */
        public Builder pullTimeout(Duration pullTimeout) {
            requireNonNull("pullTimeout", pullTimeout);
            if (pullTimeout.isZero() || pullTimeout.isNegative()) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "pullTimeout must be positive, was " + pullTimeout);
            }
            this.pullTimeout = pullTimeout;
            return this;
        }

        /**
         * A partner whose every pull failed in a pass sits out 1, 2, 4, ... ticks, at most this
         * many, until a pull from it succeeds again; 0 turns backoff off.
         */
        public Builder maxBackoffTicks(int maxBackoffTicks) {
            this.maxBackoffTicks = requireAtLeast("maxBackoffTicks", maxBackoffTicks, 0);
            return this;
        }

        /** Where ticks, timeouts and pulls run; parallel by default, a virtual-time one in tests. */
        public Builder scheduler(Scheduler scheduler) {
            this.scheduler = requireNonNull("scheduler", scheduler);
            return this;
        }

        /** Where the meters go; none by default. */
        public Builder meterRegistry(MeterRegistry meterRegistry) {
            this.meterRegistry = requireNonNull("meterRegistry", meterRegistry);
            return this;
        }

        public SyncSchedulerConfig build() {
            if (nodesSet == (membership != null)) {
                throw new SyncConfigException(Rule.NO_NODE_SET,
                        "exactly one of nodes and membership must be set (local node '" + localNode + "')");
            }
            if (topology == null) {
                throw new SyncConfigException(Rule.NO_TOPOLOGY,
                        "topology must be set: there is no default (fullMesh, ring, ringWithNeighbours,"
                                + " randomGossip or custom)");
            }
            if (shardCount < 1) {
                throw new SyncConfigException(Rule.ZERO_SHARDS, "shardCount must be at least 1, was " + shardCount);
            }
            if (interval == null) {
                throw new SyncConfigException(Rule.NON_POSITIVE_INTERVAL, "interval must be set");
            }
            if (jitter.compareTo(interval) > 0) {
                throw new SyncConfigException(Rule.INVALID_OPTION,
                        "jitter must be at most interval, was " + jitter + " > " + interval);
            }
            if (maxConcurrencyPerPartner > maxConcurrency) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "maxConcurrencyPerPartner must be at most"
                        + " maxConcurrency, was " + maxConcurrencyPerPartner + " > " + maxConcurrency);
            }
            if (membership == null) {
                topology.validate(nodes);
                PairGraph.checkLocal(localNode, nodes);
            }
            return new SyncSchedulerConfig(this, topology);
        }

        private static <T> T requireNonNull(String option, T value) {
            if (value == null) {
                throw new SyncConfigException(Rule.INVALID_OPTION, option + " must not be null");
            }
            return value;
        }

        private static int requireAtLeast(String option, int value, int min) {
            if (value < min) {
                throw new SyncConfigException(Rule.INVALID_OPTION, option + " must be at least " + min + ", was " + value);
            }
            return value;
        }
    }
}
