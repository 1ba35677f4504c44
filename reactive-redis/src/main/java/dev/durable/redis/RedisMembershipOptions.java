package dev.durable.redis;

import dev.durable.redis.internal.RedisConnector;
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

    private final String group;
    private final String nodeId;
    private final Duration ttl;
    private final Duration heartbeatInterval;
    private final Duration pollInterval;

    private RedisMembershipOptions(Builder builder) {
        this.group = builder.group;
        this.nodeId = builder.nodeId;
        this.ttl = builder.ttl;
        this.heartbeatInterval = builder.heartbeatInterval;
        this.pollInterval = builder.pollInterval;
    }

    public static Builder builder(String group, String nodeId) {
        return new Builder().group(group).nodeId(nodeId);
    }

    public Builder mutate() {
        return new Builder().group(group).nodeId(nodeId).ttl(ttl).heartbeatInterval(heartbeatInterval)
                .pollInterval(pollInterval);
    }

    public String group() {
        return group;
    }

    public String nodeId() {
        return nodeId;
    }

    public Duration ttl() {
        return ttl;
    }

    public Duration heartbeatInterval() {
        return heartbeatInterval;
    }

    public Duration pollInterval() {
        return pollInterval;
    }

    /** The registry's key: the whole name is the hash tag, so it lives in one slot of a Redis Cluster. */
    public String key() {
        return "{durable:members:" + group + "}";
    }

    @Override
    public String toString() {
        return "RedisMembershipOptions{group=" + group + ", nodeId=" + nodeId + ", ttl=" + ttl
                + ", heartbeatInterval=" + heartbeatInterval + ", pollInterval=" + pollInterval + "}";
    }

    /** Checks each value as it is set and the rules across them in {@link #build()}. */
    public static final class Builder {

        private String group = "";
        private String nodeId = "";
        private Duration ttl = DEFAULT_TTL;
        private Duration heartbeatInterval = DEFAULT_HEARTBEAT_INTERVAL;
        private Duration pollInterval = DEFAULT_POLL_INTERVAL;

        private Builder() {
        }

        /** 1 to 128 characters without white space or braces (braces would break the key's hash tag). */
        public Builder group(String group) {
            RedisConnector.requireNonNull("group", group);
            if (group.isEmpty() || group.length() > 128 || group.chars().anyMatch(c -> Character.isWhitespace(c)
                    || c == '{' || c == '}')) {
                throw new IllegalArgumentException("group must be 1 to 128 characters without white space or braces,"
                        + " was '" + group + "'");
            }
            this.group = group;
            return this;
        }

        /** 1 to 256 characters, not blank. */
        public Builder nodeId(String nodeId) {
            RedisConnector.requireNonNull("nodeId", nodeId);
            if (nodeId.isBlank() || nodeId.length() > 256) {
                throw new IllegalArgumentException("nodeId must be 1 to 256 characters and not blank, was '"
                        + nodeId + "'");
            }
            this.nodeId = nodeId;
            return this;
        }

        /** At least 100 ms (Redis keeps scores in milliseconds). */
        public Builder ttl(Duration ttl) {
            this.ttl = requireAtLeastMillis("ttl", ttl, 100);
            return this;
        }

        public Builder heartbeatInterval(Duration heartbeatInterval) {
            this.heartbeatInterval = requireAtLeastMillis("heartbeatInterval", heartbeatInterval, 10);
            return this;
        }

        public Builder pollInterval(Duration pollInterval) {
            this.pollInterval = requireAtLeastMillis("pollInterval", pollInterval, 10);
            return this;
        }

        public RedisMembershipOptions build() {
            if (ttl.compareTo(heartbeatInterval.multipliedBy(2)) <= 0) {
                throw new IllegalArgumentException("ttl must be more than twice heartbeatInterval (so a live node"
                        + " survives a missed beat), was " + ttl + " with heartbeat " + heartbeatInterval);
            }
            return new RedisMembershipOptions(this);
        }

        private static Duration requireAtLeastMillis(String option, Duration value, long millis) {
            RedisConnector.requireNonNull(option, value);
            if (value.compareTo(Duration.ofMillis(millis)) < 0) {
                throw new IllegalArgumentException(option + " must be at least " + millis + " ms, was " + value);
            }
            return value;
        }
    }
}
