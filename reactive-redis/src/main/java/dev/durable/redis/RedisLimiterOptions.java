package dev.durable.redis;

import java.time.Duration;

/**
 * How the Redis limiter names its keys and how long it waits for Redis. Immutable; build with
 * {@link #builder()} or start from {@link #defaults()}.
 *
 * <p>Keys are {@code keyPrefix + ":{" + schema + ...}"}: engines on the same schema share gates and
 * buckets, engines on other schemas sharing the Redis do not. Each gate counter and each bucket is
 * one key whose whole name is its hash tag, and every script touches exactly one key, so the
 * limiter works unchanged on Redis Cluster.
 */
public final class RedisLimiterOptions {

    public static final String DEFAULT_KEY_PREFIX = "durable:limit";
    public static final Duration DEFAULT_COMMAND_TIMEOUT = Duration.ofSeconds(1);
    /** Longer waits hold a pick (and its claimed rows) for as long while Redis is unreachable. */
    public static final Duration MAX_COMMAND_TIMEOUT = Duration.ofSeconds(30);

    private static final RedisLimiterOptions DEFAULTS = builder().build();

    private final String keyPrefix;
    private final Duration commandTimeout;

    private RedisLimiterOptions(Builder builder) {
        this.keyPrefix = builder.keyPrefix;
        this.commandTimeout = builder.commandTimeout;
    }

    public static RedisLimiterOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder().keyPrefix(keyPrefix).commandTimeout(commandTimeout);
    }

    public String keyPrefix() {
        return keyPrefix;
    }

    /** How long one admit, renew or credit may wait for Redis before the limiter counts as unavailable. */
    public Duration commandTimeout() {
        return commandTimeout;
    }

    @Override
    public String toString() {
        return "RedisLimiterOptions{keyPrefix=" + keyPrefix + ", commandTimeout=" + commandTimeout + "}";
    }

    /** Checks each value as it is set; a bad one throws {@link IllegalArgumentException} naming it. */
    public static final class Builder {

        private String keyPrefix = DEFAULT_KEY_PREFIX;
        private Duration commandTimeout = DEFAULT_COMMAND_TIMEOUT;

        private Builder() {
        }

        /** 1 to 128 characters, no white space and no braces (they would break the hash tags). */
        public Builder keyPrefix(String keyPrefix) {
            if (keyPrefix == null) {
                throw new IllegalArgumentException("keyPrefix must not be null");
            }
            if (keyPrefix.isEmpty() || keyPrefix.length() > 128 || keyPrefix.chars().anyMatch(Character::isWhitespace)
                    || keyPrefix.indexOf('{') >= 0 || keyPrefix.indexOf('}') >= 0) {
                throw new IllegalArgumentException("keyPrefix must be 1 to 128 characters without white space or braces,"
                        + " was '" + keyPrefix + "'");
            }
            this.keyPrefix = keyPrefix;
            return this;
        }

        /** More than zero and at most {@link #MAX_COMMAND_TIMEOUT}. */
        public Builder commandTimeout(Duration commandTimeout) {
            if (commandTimeout == null) {
                throw new IllegalArgumentException("commandTimeout must not be null");
            }
            if (commandTimeout.isZero() || commandTimeout.isNegative() || commandTimeout.compareTo(MAX_COMMAND_TIMEOUT) > 0) {
                throw new IllegalArgumentException("commandTimeout must be more than zero and at most "
                        + MAX_COMMAND_TIMEOUT + ", was " + commandTimeout);
            }
            this.commandTimeout = commandTimeout;
            return this;
        }

        public RedisLimiterOptions build() {
            return new RedisLimiterOptions(this);
        }
    }
}
