package dev.durable.redis;

import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
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

    private static final OptionList<RedisPokeOptions> OPTIONS = new OptionList<>("RedisPokeOptions");

    private static final Option<String> CHANNEL_PREFIX = OPTIONS.add("channelPrefix", String.class,
            DEFAULT_CHANNEL_PREFIX, RedisPokeOptions::checkChannelPrefix,
            "What an engine's channel starts with (its schema follows): 1 to 128 characters, no white space.");
    private static final Option<Duration> COALESCE_WINDOW = OPTIONS.add("coalesceWindow", Duration.class,
            DEFAULT_COALESCE_WINDOW, RedisPokeOptions::checkCoalesceWindow,
            "How long the sender gathers pokes of one queue into one message: from zero (each at once) to 1 s.");

    private static final RedisPokeOptions DEFAULTS = builder().build();

    private final OptionValues values;

    private RedisPokeOptions(OptionValues values) {
        this.values = values;
    }

    public static RedisPokeOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder(OptionValues.none());
    }

    /** Every option, with its name, type, default, rule and description. */
    public static OptionList<RedisPokeOptions> options() {
        return OPTIONS;
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder(values);
    }

    public String channelPrefix() {
        return values.get(CHANNEL_PREFIX);
    }

    /** How long the sender gathers pokes of one queue into one message. */
    public Duration coalesceWindow() {
        return values.get(COALESCE_WINDOW);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof RedisPokeOptions that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    private static String checkChannelPrefix(String option, String channelPrefix) {
        Checks.requireNonNull(option, channelPrefix);
        if (channelPrefix.isEmpty() || channelPrefix.length() > 128
                || channelPrefix.chars().anyMatch(Character::isWhitespace)) {
            throw new IllegalArgumentException(option + " must be 1 to 128 characters without white space, was '"
                    + channelPrefix + "'");
        }
        return channelPrefix;
    }

    private static Duration checkCoalesceWindow(String option, Duration coalesceWindow) {
        Checks.requireNonNull(option, coalesceWindow);
        if (coalesceWindow.isNegative() || coalesceWindow.compareTo(MAX_COALESCE_WINDOW) > 0) {
            throw new IllegalArgumentException(option + " must be between 0 and " + MAX_COALESCE_WINDOW
                    + ", was " + coalesceWindow);
        }
        return coalesceWindow;
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

        /** 1 to 128 characters, no white space. */
        public Builder channelPrefix(String channelPrefix) {
            return set(CHANNEL_PREFIX, channelPrefix);
        }

        /** From zero (send each poke at once) to {@link #MAX_COALESCE_WINDOW}. */
        public Builder coalesceWindow(Duration coalesceWindow) {
            return set(COALESCE_WINDOW, coalesceWindow);
        }

        public RedisPokeOptions build() {
            return new RedisPokeOptions(values);
        }
    }
}
