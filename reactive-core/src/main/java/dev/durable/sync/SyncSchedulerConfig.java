package dev.durable.sync;

import dev.durable.sync.SyncConfigException.Rule;
import dev.durable.options.Check;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
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

    private static final OptionList<SyncSchedulerConfig> OPTIONS = new OptionList<>("SyncSchedulerConfig");

    private static final Option<String> LOCAL_NODE = OPTIONS.add("localNode", String.class, null,
            SyncSchedulerConfig::checkLocalNode, "The node this scheduler runs on.");
    private static final Option<List<String>> NODES = OPTIONS.add(Option.<List<String>>of("nodes", List.class, null,
            (option, nodes) -> PairGraph.checkNodes(nodes),
            "A static node set, in the order that shapes rings and gossip; exactly one of nodes and membership."));
    private static final Option<Flux<Set<String>>> MEMBERSHIP = OPTIONS.add(Option.<Flux<Set<String>>>of("membership",
            Flux.class, null, SyncSchedulerConfig::requireNonNull,
            "A node set that changes at run time: each tick uses the latest set; exactly one of nodes and membership.")
            .printedAs(membership -> "dynamic"));
    private static final Option<SyncTopology> TOPOLOGY = OPTIONS.add("topology", SyncTopology.class, null,
            SyncSchedulerConfig::requireNonNull, "Who syncs with whom; required, there is no default.");
    private static final Option<Integer> SHARD_COUNT = OPTIONS.add("shardCount", Integer.class, null,
            SyncSchedulerConfig::checkShardCount, "The number of shards, numbered 0 to shardCount - 1; at least 1.");
    private static final Option<ShardSource> SHARD_SOURCE = OPTIONS.add(Option.of("shardSource", ShardSource.class,
            ShardSource.all(), SyncSchedulerConfig::requireNonNull, "Which shards each pass pulls; all by default.")
            .printedAs(source -> null));
    private static final Option<Duration> INTERVAL = OPTIONS.add("interval", Duration.class, null,
            SyncSchedulerConfig::checkInterval, "The time from the end of one pass to the next tick; positive.");
    private static final Option<Duration> JITTER = OPTIONS.add("jitter", Duration.class, Duration.ZERO,
            SyncSchedulerConfig::checkJitter, "Each delay is shortened by a random amount below it (at most the"
                    + " interval); zero turns it off.");
    private static final Option<Random> RANDOM = OPTIONS.add(Option.of("random", Random.class, null,
            SyncSchedulerConfig::requireNonNull, "Where jitter comes from (a seeded one makes it reproducible).")
            .printedAs(random -> null));
    private static final Option<Integer> MAX_CONCURRENCY = OPTIONS.add("maxConcurrency", Integer.class,
            DEFAULT_MAX_CONCURRENCY, atLeast(1), "The most pulls of one pass in flight at once, over all partners.");
    private static final Option<Integer> MAX_CONCURRENCY_PER_PARTNER = OPTIONS.add("maxConcurrencyPerPartner",
            Integer.class, DEFAULT_MAX_CONCURRENCY_PER_PARTNER, atLeast(1),
            "The most pulls from one partner in flight at once; at most maxConcurrency.");
    private static final Option<Duration> PULL_TIMEOUT = OPTIONS.add("pullTimeout", Duration.class,
            DEFAULT_PULL_TIMEOUT, SyncSchedulerConfig::checkPullTimeout,
            "A trigger that has not completed after this long counts as a failed pull.");
    private static final Option<Integer> MAX_BACKOFF_TICKS = OPTIONS.add("maxBackoffTicks", Integer.class,
            DEFAULT_MAX_BACKOFF_TICKS, atLeast(0), "A partner whose every pull failed in a pass sits out 1, 2, 4, ..."
                    + " ticks, at most this many; 0 turns backoff off.");
    private static final Option<Scheduler> SCHEDULER = OPTIONS.add(Option.of("scheduler", Scheduler.class,
            Schedulers.parallel(), SyncSchedulerConfig::requireNonNull,
            "Where ticks, timeouts and pulls run; parallel by default, a virtual-time one in tests.")
            .printedAs(scheduler -> null));
    private static final Option<MeterRegistry> METER_REGISTRY = OPTIONS.add(Option.of("meterRegistry",
            MeterRegistry.class, null, SyncSchedulerConfig::requireNonNull, "Where the meters go; none by default.")
            .printedAs(registry -> null));

    private final OptionValues values;

    private SyncSchedulerConfig(OptionValues values) {
        this.values = values;
    }

    /** A builder for the scheduler of {@code localNode}. */
    public static Builder builder(String localNode) {
        return new Builder(localNode);
    }

    /** Every option, with its name, type, default, rule and description. */
    public static OptionList<SyncSchedulerConfig> options() {
        return OPTIONS;
    }

    public String localNode() {
        return values.get(LOCAL_NODE);
    }

    /** The static node set, in the order that shapes rings and gossip; empty with membership. */
    public List<String> nodes() {
        List<String> nodes = values.get(NODES);
        return nodes == null ? List.of() : nodes;
    }

    /** The membership source, when the node set changes at run time. */
    public @Nullable Flux<Set<String>> membership() {
        return values.get(MEMBERSHIP);
    }

    public SyncTopology topology() {
        return values.get(TOPOLOGY);
    }

    public int shardCount() {
        return values.get(SHARD_COUNT);
    }

    public ShardSource shardSource() {
        return values.get(SHARD_SOURCE);
    }

    public Duration interval() {
        return values.get(INTERVAL);
    }

    public Duration jitter() {
        return values.get(JITTER);
    }

    public Random random() {
        return values.get(RANDOM);
    }

    public int maxConcurrency() {
        return values.get(MAX_CONCURRENCY);
    }

    public int maxConcurrencyPerPartner() {
        return values.get(MAX_CONCURRENCY_PER_PARTNER);
    }

    public Duration pullTimeout() {
        return values.get(PULL_TIMEOUT);
    }

    public int maxBackoffTicks() {
        return values.get(MAX_BACKOFF_TICKS);
    }

    public Scheduler scheduler() {
        return values.get(SCHEDULER);
    }

    public @Nullable MeterRegistry meterRegistry() {
        return values.get(METER_REGISTRY);
    }

    /**
     * The local node's partners in the static node set (round 0); with membership the partners are
     * known only per tick, and this is a {@link Rule#NO_NODE_SET} error.
     */
    public List<String> partners() {
        if (membership() != null) {
            throw new SyncConfigException(Rule.NO_NODE_SET,
                    "the node set comes from membership: partners are known per tick, not up front");
        }
        return topology().partners(localNode(), nodes());
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof SyncSchedulerConfig that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    private static String checkLocalNode(String option, String localNode) {
        if (localNode == null || localNode.isBlank()) {
            throw new SyncConfigException(Rule.BLANK_NODE, option + " must not be blank, was "
                    + (localNode == null ? "null" : "'" + localNode + "'"));
        }
        return localNode;
    }

    private static Integer checkShardCount(String option, Integer shardCount) {
        if (shardCount == null || shardCount < 1) {
            throw new SyncConfigException(Rule.ZERO_SHARDS, option + " must be at least 1, was "
                    + (shardCount == null ? 0 : shardCount));
        }
        return shardCount;
    }

    private static Duration checkInterval(String option, Duration interval) {
        requireNonNull(option, interval);
        if (interval.isZero() || interval.isNegative()) {
            throw new SyncConfigException(Rule.NON_POSITIVE_INTERVAL, option + " must be positive, was " + interval);
        }
        return interval;
    }

    private static Duration checkJitter(String option, Duration jitter) {
        requireNonNull(option, jitter);
        if (jitter.isNegative()) {
            throw new SyncConfigException(Rule.INVALID_OPTION, option + " must not be negative, was " + jitter);
        }
        return jitter;
    }

    private static Duration checkPullTimeout(String option, Duration pullTimeout) {
        requireNonNull(option, pullTimeout);
        if (pullTimeout.isZero() || pullTimeout.isNegative()) {
            throw new SyncConfigException(Rule.INVALID_OPTION, option + " must be positive, was " + pullTimeout);
        }
        return pullTimeout;
    }

    private static <T> T requireNonNull(String option, T value) {
        if (value == null) {
            throw new SyncConfigException(Rule.INVALID_OPTION, option + " must not be null");
        }
        return value;
    }

    private static Check<Integer> atLeast(int min) {
        return (option, value) -> {
            requireNonNull(option, value);
            if (value < min) {
                throw new SyncConfigException(Rule.INVALID_OPTION, option + " must be at least " + min + ", was "
                        + value);
            }
            return value;
        };
    }

    /** Collects the options; see {@link SyncSchedulerConfig}. */
    public static final class Builder {

        private OptionValues values = OptionValues.none();

        private Builder(String localNode) {
            set(LOCAL_NODE, localNode);
        }

        /** Sets any option of {@link #options()}: the same as the option's own setter. */
        public <T> Builder set(Option<T> option, T value) {
            values = OPTIONS.set(values, option, value);
            return this;
        }

        /** A static node set; its order shapes rings and gossip, so give every node the same order. */
        public Builder nodes(Collection<String> nodes) {
            return set(NODES, PairGraph.checkNodes(nodes));
        }

        /**
         * A node set that changes at run time: each tick uses the latest set, sorted so every node
         * sees the same order; a tick before the first set, or whose set lacks the local node, is
         * skipped and counted. Custom pairs to nodes not in the current set are idle.
         */
        public Builder membership(Flux<Set<String>> membership) {
            return set(MEMBERSHIP, membership);
        }

        /** Who syncs with whom; required, there is no default. */
        public Builder topology(SyncTopology topology) {
            return set(TOPOLOGY, topology);
        }

        /** The number of shards, numbered {@code 0..shardCount-1}; at least 1. */
        public Builder shardCount(int shardCount) {
            return set(SHARD_COUNT, shardCount);
        }

        /** Which shards each pass pulls; all of them by default. */
        public Builder shardSource(ShardSource shardSource) {
            return set(SHARD_SOURCE, shardSource);
        }

        /** The time from the end of one pass to the next tick; positive. */
        public Builder interval(Duration interval) {
            return set(INTERVAL, interval);
        }

        /**
         * Each delay is shortened by a random amount below {@code jitter} (at most the interval),
         * so nodes started together drift apart instead of pulling in lock-step; with
         * {@code jitter == interval} the first tick lands anywhere within the first interval.
         * Zero (the default) turns it off.
         */
        public Builder jitter(Duration jitter) {
            return set(JITTER, jitter);
        }

        /** Where jitter comes from (a seeded one makes it reproducible in tests). */
        public Builder random(Random random) {
            return set(RANDOM, random);
        }

        /** The most pulls of one pass in flight at once, over all partners. */
        public Builder maxConcurrency(int maxConcurrency) {
            return set(MAX_CONCURRENCY, maxConcurrency);
        }

        /** The most pulls from one partner in flight at once. */
        public Builder maxConcurrencyPerPartner(int maxConcurrencyPerPartner) {
            return set(MAX_CONCURRENCY_PER_PARTNER, maxConcurrencyPerPartner);
        }

        /** A trigger that has not completed after this long counts as a failed pull. */
        public Builder pullTimeout(Duration pullTimeout) {
            return set(PULL_TIMEOUT, pullTimeout);
        }

        /**
         * A partner whose every pull failed in a pass sits out 1, 2, 4, ... ticks, at most this
         * many, until a pull from it succeeds again; 0 turns backoff off.
         */
        public Builder maxBackoffTicks(int maxBackoffTicks) {
            return set(MAX_BACKOFF_TICKS, maxBackoffTicks);
        }

        /** Where ticks, timeouts and pulls run; parallel by default, a virtual-time one in tests. */
        public Builder scheduler(Scheduler scheduler) {
            return set(SCHEDULER, scheduler);
        }

        /** Where the meters go; none by default. */
        public Builder meterRegistry(MeterRegistry meterRegistry) {
            return set(METER_REGISTRY, meterRegistry);
        }

        public SyncSchedulerConfig build() {
            String localNode = values.get(LOCAL_NODE);
            List<String> nodes = values.get(NODES);
            Flux<Set<String>> membership = values.get(MEMBERSHIP);
            if ((nodes != null) == (membership != null)) {
                throw new SyncConfigException(Rule.NO_NODE_SET,
                        "exactly one of nodes and membership must be set (local node '" + localNode + "')");
            }
            SyncTopology topology = values.get(TOPOLOGY);
            if (topology == null) {
                throw new SyncConfigException(Rule.NO_TOPOLOGY,
                        "topology must be set: there is no default (fullMesh, ring, ringWithNeighbours,"
                                + " randomGossip or custom)");
            }
            checkShardCount("shardCount", values.get(SHARD_COUNT));
            Duration interval = values.get(INTERVAL);
            if (interval == null) {
                throw new SyncConfigException(Rule.NON_POSITIVE_INTERVAL, "interval must be set");
            }
            Duration jitter = values.get(JITTER);
            if (jitter.compareTo(interval) > 0) {
                throw new SyncConfigException(Rule.INVALID_OPTION,
                        "jitter must be at most interval, was " + jitter + " > " + interval);
            }
            int maxConcurrency = values.get(MAX_CONCURRENCY);
            int perPartner = values.get(MAX_CONCURRENCY_PER_PARTNER);
            if (perPartner > maxConcurrency) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "maxConcurrencyPerPartner must be at most"
                        + " maxConcurrency, was " + perPartner + " > " + maxConcurrency);
            }
            if (membership == null) {
                topology.validate(nodes);
                PairGraph.checkLocal(localNode, nodes);
            }
            // Each configuration draws its jitter from a source of its own unless given one.
            return new SyncSchedulerConfig(values.isSet(RANDOM) ? values : values.with(RANDOM, new Random()));
        }
    }
}
