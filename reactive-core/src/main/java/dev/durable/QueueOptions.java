package dev.durable;

import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
import java.time.Duration;

/**
 * The knobs of one queue's scheduler on one engine. Immutable; build with {@link #builder}. Each
 * option is declared once below ({@link #options()} lists them, with their defaults and rules):
 *
 * <ul>
 *   <li>{@code concurrency}: handlers running at once (the executor's width); a run's slot is free
 *       once only its outcome's commit is left;
 *   <li>{@code prefetch}: rows claimed beyond the run slots (buffered, or finished and waiting for
 *       their outcome's commit), so a finished run refills at once; held rows are heartbeated, so
 *       depth does not race the lease;
 *   <li>{@code minDemand}: pick only when at least this many claims are free (fat picks), unless
 *       the queue is fully idle; clamped to {@code concurrency + prefetch};
 *   <li>{@code pollInterval} and {@code maxPollInterval}: the idle poll, doubled by each empty
 *       pick of an idle queue up to the ceiling, and back to the base as soon as there is work;
 *   <li>{@code drainTimeout}: how long {@code close()} waits for running steps.
 * </ul>
 */
public final class QueueOptions {

    public static final int DEFAULT_CONCURRENCY = 10;
    public static final int DEFAULT_PREFETCH = 0;
    public static final int DEFAULT_MIN_DEMAND = 1;
    public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofSeconds(1);
    public static final Duration DEFAULT_MAX_POLL_INTERVAL = Duration.ofSeconds(10);
    public static final Duration DEFAULT_DRAIN_TIMEOUT = Duration.ofSeconds(15);

    private static final OptionList<QueueOptions> OPTIONS = new OptionList<>("QueueOptions");

    private static final Option<Integer> CONCURRENCY = OPTIONS.add("concurrency", Integer.class, DEFAULT_CONCURRENCY,
            Checks.atLeast(1), "Handlers running at once (the executor's width); a run's slot is free once only"
                    + " its outcome's commit is left.");
    private static final Option<Integer> PREFETCH = OPTIONS.add("prefetch", Integer.class, DEFAULT_PREFETCH,
            Checks.atLeast(0), "Rows claimed beyond the run slots (buffered, or finished and waiting for their outcome's commit),"
                    + " so a finished run refills at once.");
    private static final Option<Integer> MIN_DEMAND = OPTIONS.add("minDemand", Integer.class, DEFAULT_MIN_DEMAND,
            Checks.atLeast(1), "Pick only when at least this many claims are free, unless the queue is fully idle;"
                    + " clamped to concurrency plus prefetch.");
    private static final Option<Duration> POLL_INTERVAL = OPTIONS.add("pollInterval", Duration.class,
            DEFAULT_POLL_INTERVAL, Checks.positive(), "The idle poll, doubled by each empty pick of an idle queue up"
                    + " to maxPollInterval.");
    private static final Option<Duration> MAX_POLL_INTERVAL = OPTIONS.add("maxPollInterval", Duration.class,
            DEFAULT_MAX_POLL_INTERVAL, Checks.positive(), "The ceiling the idle poll backs off to; at least"
                    + " pollInterval (unset, a longer pollInterval raises it).");
    private static final Option<Duration> DRAIN_TIMEOUT = OPTIONS.add("drainTimeout", Duration.class,
            DEFAULT_DRAIN_TIMEOUT, Checks.nonNegative(), "How long close() waits for running steps.");
    private static final Option<Fairness> FAIRNESS = OPTIONS.add(Option.of("fairness", Fairness.class,
            Fairness.none(), Checks.notNull(), "How claims are shared across the keys of this queue (weights, per-key"
                    + " cap, aging); none by default.")
            .printedAs(fairness -> fairness.equals(Fairness.none()) ? null : fairness.toString()));

    private final String name;
    private final OptionValues values;

    private QueueOptions(String name, OptionValues values) {
        this.name = name;
        this.values = values;
    }

    public static Builder builder(String name) {
        return new Builder(name, OptionValues.none());
    }

    /** A queue with every knob at its default. */
    public static QueueOptions of(String name) {
        return builder(name).build();
    }

    /** Every option of a queue, in declaration order, with its name, type, default, rule and description. */
    public static OptionList<QueueOptions> options() {
        return OPTIONS;
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder(name, values);
    }

    public String name() {
        return name;
    }

    public int concurrency() {
        return values.get(CONCURRENCY);
    }

    public int prefetch() {
        return values.get(PREFETCH);
    }

    /** The clamped min demand. */
    public int minDemand() {
        return values.get(MIN_DEMAND);
    }

    /** Concurrency plus prefetch: the most rows this queue's scheduler holds claimed. */
    public int claimCeiling() {
        return concurrency() + prefetch();
    }

    public Duration pollInterval() {
        return values.get(POLL_INTERVAL);
    }

    public Duration maxPollInterval() {
        return values.get(MAX_POLL_INTERVAL);
    }

    public Duration drainTimeout() {
        return values.get(DRAIN_TIMEOUT);
    }

    /** How claims are shared across the keys of this queue; {@link Fairness#none()} by default. */
    public Fairness fairness() {
        return values.get(FAIRNESS);
    }

    /** Equal when the names and every option are. */
    @Override
    public boolean equals(Object other) {
        return other instanceof QueueOptions that && name.equals(that.name) && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return 31 * name.hashCode() + values.hashCode();
    }

    @Override
    public String toString() {
        return "QueueOptions{name=" + name + ", " + OPTIONS.fields(values) + "}";
    }

    public static final class Builder {

        private final String name;
        private OptionValues values;

        private Builder(String name, OptionValues values) {
            this.name = QueueNames.require("queue name", name);
            this.values = values;
        }

        /** Sets any option of {@link #options()}: the same as the option's own setter. */
        public <T> Builder set(Option<T> option, T value) {
            values = OPTIONS.set(values, option, value);
            return this;
        }

        public Builder concurrency(int concurrency) {
            return set(CONCURRENCY, concurrency);
        }

        public Builder prefetch(int prefetch) {
            return set(PREFETCH, prefetch);
        }

        public Builder minDemand(int minDemand) {
            return set(MIN_DEMAND, minDemand);
        }

        public Builder pollInterval(Duration pollInterval) {
            return set(POLL_INTERVAL, pollInterval);
        }

        public Builder maxPollInterval(Duration maxPollInterval) {
            return set(MAX_POLL_INTERVAL, maxPollInterval);
        }

        public Builder drainTimeout(Duration drainTimeout) {
            return set(DRAIN_TIMEOUT, drainTimeout);
        }

        /** Fair share across the keys of this queue (weights, per-key cap, aging); see {@link Fairness}. */
        public Builder fairness(Fairness fairness) {
            return set(FAIRNESS, fairness);
        }

        public QueueOptions build() {
            OptionValues built = values;
            Duration pollInterval = built.get(POLL_INTERVAL);
            if (!built.isSet(MAX_POLL_INTERVAL) && pollInterval.compareTo(DEFAULT_MAX_POLL_INTERVAL) > 0) {
                // A poll interval above the default ceiling raises the ceiling (left at its default) rather than failing.
                built = built.with(MAX_POLL_INTERVAL, pollInterval);
            }
            Duration maxPollInterval = built.get(MAX_POLL_INTERVAL);
            if (maxPollInterval.compareTo(pollInterval) < 0) {
                throw new IllegalArgumentException("maxPollInterval must be at least pollInterval, was "
                        + maxPollInterval + " < " + pollInterval + " (queue " + name + ")");
            }
            int ceiling = built.get(CONCURRENCY) + built.get(PREFETCH);
            return new QueueOptions(name, built.with(MIN_DEMAND, Math.min(built.get(MIN_DEMAND), ceiling)));
        }
    }
}
