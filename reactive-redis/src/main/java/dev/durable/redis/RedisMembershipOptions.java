package dev.durable.redis;

import dev.durable.options.Check;
import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
import java.time.Duration;

/**
 * Who this node is in which group, and the timings of its registration. Immutable; build with
 * {@link #builder(String, String)}. A node re-registers every {@link #heartbeatInterval()}; one that
 * stops (crashed, cut off) drops out of the set within {@link #ttl()}; {@link #pollInterval()} is how
 * often the set is read for {@link RedisMembership#members()}.
 */
public final class RedisMembershipOptions {

    public static final Duration DEFAULT_TTL = Duration.ofSeconds(10);
    public static final Duration DEFAULT_HEARTBEAT_INTERVAL = Duration.ofSeconds(3);
    public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofSeconds(1);

    private static final OptionList<RedisMembershipOptions> OPTIONS = new OptionList<>("RedisMembershipOptions");

    private static final Option<String> GROUP = OPTIONS.add("group", String.class, null,
            RedisMembershipOptions::checkGroup, "The group the node registers in: 1 to 128 characters without white"
                    + " space or braces (braces would break the key's hash tag).");
    private static final Option<String> NODE_ID = OPTIONS.add("nodeId", String.class, null,
            RedisMembershipOptions::checkNodeId, "This node's id in the group: 1 to 256 characters, not blank.");
    private static final Option<Duration> TTL = OPTIONS.add("ttl", Duration.class, DEFAULT_TTL, atLeastMillis(100),
            "How soon a node that stopped re-registering drops out of the set; more than twice heartbeatInterval"
                    + " (at least 100 ms: Redis keeps scores in milliseconds).");
    private static final Option<Duration> HEARTBEAT_INTERVAL = OPTIONS.add("heartbeatInterval", Duration.class,
            DEFAULT_HEARTBEAT_INTERVAL, atLeastMillis(10), "How often the node re-registers.");
    private static final Option<Duration> POLL_INTERVAL = OPTIONS.add("pollInterval", Duration.class,
            DEFAULT_POLL_INTERVAL, atLeastMillis(10), "How often the set is read for members().");

    private final OptionValues values;

    private RedisMembershipOptions(OptionValues values) {
        this.values = values;
    }

    public static Builder builder(String group, String nodeId) {
        return new Builder(OptionValues.none()).group(group).nodeId(nodeId);
    }

    /** Every option, with its name, type, default, rule and description. */
    public static OptionList<RedisMembershipOptions> options() {
        return OPTIONS;
    }

    public Builder mutate() {
        return new Builder(values);
    }

    public String group() {
        return values.get(GROUP);
    }

    public String nodeId() {
        return values.get(NODE_ID);
    }

    public Duration ttl() {
        return values.get(TTL);
    }

    public Duration heartbeatInterval() {
        return values.get(HEARTBEAT_INTERVAL);
    }

    public Duration pollInterval() {
        return values.get(POLL_INTERVAL);
    }

    /** The registry's key: the whole name is the hash tag, so it lives in one slot of a Redis Cluster. */
    public String key() {
        return "{durable:members:" + group() + "}";
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof RedisMembershipOptions that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    private static String checkGroup(String option, String group) {
        Checks.requireNonNull(option, group);
        if (group.isEmpty() || group.length() > 128 || group.chars().anyMatch(c -> Character.isWhitespace(c)
                || c == '{' || c == '}')) {
            throw new IllegalArgumentException(option + " must be 1 to 128 characters without white space or braces,"
                    + " was '" + group + "'");
        }
        return group;
    }

    private static String checkNodeId(String option, String nodeId) {
        Checks.requireNonNull(option, nodeId);
        if (nodeId.isBlank() || nodeId.length() > 256) {
            throw new IllegalArgumentException(option + " must be 1 to 256 characters and not blank, was '"
                    + nodeId + "'");
        }
        return nodeId;
    }

    private static Check<Duration> atLeastMillis(long millis) {
        return (option, value) -> {
            Checks.requireNonNull(option, value);
            if (value.compareTo(Duration.ofMillis(millis)) < 0) {
                throw new IllegalArgumentException(option + " must be at least " + millis + " ms, was " + value);
            }
            return value;
        };
    }

    /** Checks each value as it is set and the rules across them in {@link #build()}. */
    public static final class Builder {

        private OptionValues values;

        private Builder(OptionValues values) {
            this.values = values;
        }

        /** Sets any option of {@link #options()}: the same as the option's own setter. */
        public <T> Builder set(Option<T> option, T value) {
            values = OPTIONS.set(values, option, value);
            return this;
        }

        /** 1 to 128 characters without white space or braces (braces would break the key's hash tag). */
        public Builder group(String group) {
            return set(GROUP, group);
        }

        /** 1 to 256 characters, not blank. */
        public Builder nodeId(String nodeId) {
            return set(NODE_ID, nodeId);
        }

        /** At least 100 ms (Redis keeps scores in milliseconds). */
        public Builder ttl(Duration ttl) {
            return set(TTL, ttl);
        }

        public Builder heartbeatInterval(Duration heartbeatInterval) {
            return set(HEARTBEAT_INTERVAL, heartbeatInterval);
        }

        public Builder pollInterval(Duration pollInterval) {
            return set(POLL_INTERVAL, pollInterval);
        }

        public RedisMembershipOptions build() {
            Duration ttl = values.get(TTL);
            Duration heartbeatInterval = values.get(HEARTBEAT_INTERVAL);
            if (ttl.compareTo(heartbeatInterval.multipliedBy(2)) <= 0) {
                throw new IllegalArgumentException("ttl must be more than twice heartbeatInterval (so a live node"
                        + " survives a missed beat), was " + ttl + " with heartbeat " + heartbeatInterval);
            }
            return new RedisMembershipOptions(values);
        }
    }
}
