package dev.durable.redis;

import java.time.Duration;

/**
 * How the Redis poke transport names its channel and coalesces what it sends. Immutable; build with
 * {@link #builder()} or start from {@link #defaults()}.
 *
 * <p>The channel of an engine is {@code channelPrefix + schema}: engines on the same schema poke each
 * other, engines on other schemas sharing the Redis do not. Give deployments that share one Redis
 * but use different databases with equal schema names their own prefix.
 */
public final class RedisPokeOptions {

    public static final String DEFAULT_CHANNEL_PREFIX = "durable:poke:";
    public static final Duration DEFAULT_COALESCE_WINDOW = Duration.ofMillis(5);
    /** Longer windows delay every remote poke by as much, for little gain. */
    public static final Duration MAX_COALESCE_WINDOW = Duration.ofSeconds(1);

    private static final RedisPokeOptions DEFAULTS = builder().build();

    private final String channelPrefix;
    private final Duration coalesceWindow;

    private RedisPokeOptions(Builder builder) {
        this.channelPrefix = builder.channelPrefix;
        this.coalesceWindow = builder.coalesceWindow;
    }

    public static RedisPokeOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder().channelPrefix(channelPrefix).coalesceWindow(coalesceWindow);
    }

    public String channelPrefix() {
        return channelPrefix;
    }

    /** How long the sender gathers pokes of one queue into one message. */
    public Duration coalesceWindow() {
        return coalesceWindow;
    }

    @Override
    public String toString() {
        return "RedisPokeOptions{channelPrefix=" + channelPrefix + ", coalesceWindow=" + coalesceWindow + "}";
    }

    /** Checks each value as it is set; a bad one throws {@link IllegalArgumentException} naming it. */
    public static final class Builder {

        private String channelPrefix = DEFAULT_CHANNEL_PREFIX;
        private Duration coalesceWindow = DEFAULT_COALESCE_WINDOW;

        private Builder() {
        }

        /** 1 to 128 characters, no white space. */
        public Builder channelPrefix(String channelPrefix) {
            if (channelPrefix == null) {
                throw new IllegalArgumentException("channelPrefix must not be null");
            }
            if (channelPrefix.isEmpty() || channelPrefix.length() > 128 || channelPrefix.chars().anyMatch(Character::isWhitespace)) {
                throw new IllegalArgumentException("channelPrefix must be 1 to 128 characters without white space, was '"
                        + channelPrefix + "'");
            }
            this.channelPrefix = channelPrefix;
            return this;
        }

        /** From zero (send each poke at once) to {@link #MAX_COALESCE_WINDOW}. */
        public Builder coalesceWindow(Duration coalesceWindow) {
            if (coalesceWindow == null) {
                throw new IllegalArgumentException("coalesceWindow must not be null");
            }
            if (coalesceWindow.isNegative() || coalesceWindow.compareTo(MAX_COALESCE_WINDOW) > 0) {
                throw new IllegalArgumentException("coalesceWindow must be between 0 and " + MAX_COALESCE_WINDOW
                        + ", was " + coalesceWindow);
            }
            this.coalesceWindow = coalesceWindow;
            return this;
        }

        public RedisPokeOptions build() {
            return new RedisPokeOptions(this);
        }
    }
}
