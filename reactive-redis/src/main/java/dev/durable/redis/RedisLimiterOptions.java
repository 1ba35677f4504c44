package dev.durable.redis;

import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
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

    private static final OptionList<RedisLimiterOptions> OPTIONS = new OptionList<>("RedisLimiterOptions");

    private static final Option<String> KEY_PREFIX = OPTIONS.add("keyPrefix", String.class, DEFAULT_KEY_PREFIX,
            RedisLimiterOptions::checkKeyPrefix, "What every key of the limiter starts with: 1 to 128 characters,"
                    + " no white space and no braces (they would break the hash tags).");
    private static final Option<Duration> COMMAND_TIMEOUT = OPTIONS.add("commandTimeout", Duration.class,
            DEFAULT_COMMAND_TIMEOUT, RedisLimiterOptions::checkCommandTimeout, "How long one admit, renew or credit"
                    + " may wait for Redis before the limiter counts as unavailable; at most 30 s.");

    private static final RedisLimiterOptions DEFAULTS = builder().build();

    private final OptionValues values;

    private RedisLimiterOptions(OptionValues values) {
        this.values = values;
    }

    public static RedisLimiterOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder(OptionValues.none());
    }

    /** Every option, with its name, type, default, rule and description. */
    public static OptionList<RedisLimiterOptions> options() {
        return OPTIONS;
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder(values);
    }

    public String keyPrefix() {
        return values.get(KEY_PREFIX);
    }

    /** How long one admit, renew or credit may wait for Redis before the limiter counts as unavailable. */
    public Duration commandTimeout() {
        return values.get(COMMAND_TIMEOUT);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof RedisLimiterOptions that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    private static String checkKeyPrefix(String option, String keyPrefix) {
        Checks.requireNonNull(option, keyPrefix);
        if (keyPrefix.isEmpty() || keyPrefix.length() > 128 || keyPrefix.chars().anyMatch(Character::isWhitespace)
                || keyPrefix.indexOf('{') >= 0 || keyPrefix.indexOf('}') >= 0) {
            throw new IllegalArgumentException(option + " must be 1 to 128 characters without white space or braces,"
                    + " was '" + keyPrefix + "'");
        }
        return keyPrefix;
    }

    private static Duration checkCommandTimeout(String option, Duration commandTimeout) {
        Checks.requireNonNull(option, commandTimeout);
        if (commandTimeout.isZero() || commandTimeout.isNegative() || commandTimeout.compareTo(MAX_COMMAND_TIMEOUT) > 0) {
            throw new IllegalArgumentException(option + " must be more than zero and at most "
                    + MAX_COMMAND_TIMEOUT + ", was " + commandTimeout);
        }
        return commandTimeout;
    }

    /** Checks each value as it is set; a bad one throws {@link IllegalArgumentException} naming it. */
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

        /** 1 to 128 characters, no white space and no braces (they would break the hash tags). */
        public Builder keyPrefix(String keyPrefix) {
            return set(KEY_PREFIX, keyPrefix);
        }

        /** More than zero and at most {@link #MAX_COMMAND_TIMEOUT}. */
        public Builder commandTimeout(Duration commandTimeout) {
            return set(COMMAND_TIMEOUT, commandTimeout);
        }

        public RedisLimiterOptions build() {
            return new RedisLimiterOptions(values);
        }
    }
}
