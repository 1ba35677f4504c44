package dev.durable;

import java.time.Duration;

/**
 * The knobs of one queue's scheduler on one engine. Immutable; build with {@link #builder}.
 *
 * <ul>
 *   <li>{@code concurrency}: runs at once (the executor's width);
 *   <li>{@code prefetch}: rows claimed and buffered beyond the running ones, so a finished run
 *       refills at once; buffered rows are heartbeated, so depth does not race the lease;
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

    private final String name;
    private final int concurrency;
    private final int prefetch;
    private final int minDemand;
    private final Duration pollInterval;
    private final Duration maxPollInterval;
    private final Duration drainTimeout;
    private final Fairness fairness;

    private QueueOptions(Builder builder) {
        this.name = builder.name;
        this.concurrency = builder.concurrency;
        this.prefetch = builder.prefetch;
        this.minDemand = Math.min(builder.minDemand, builder.concurrency + builder.prefetch);
        this.pollInterval = builder.pollInterval;
        this.maxPollInterval = builder.maxPollInterval;
        this.drainTimeout = builder.drainTimeout;
        this.fairness = builder.fairness;
    }

    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** A queue with every knob at its default. */
    public static QueueOptions of(String name) {
        return builder(name).build();
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder(name).concurrency(concurrency).prefetch(prefetch).minDemand(minDemand)
                .pollInterval(pollInterval).maxPollInterval(maxPollInterval).drainTimeout(drainTimeout).fairness(fairness);
    }

    public String name() {
        return name;
    }

    public int concurrency() {
        return concurrency;
    }

    public int prefetch() {
        return prefetch;
    }

    /** The clamped min demand. */
    public int minDemand() {
        return minDemand;
    }

    /** Concurrency plus prefetch: the most rows this queue's scheduler holds claimed. */
    public int claimCeiling() {
        return concurrency + prefetch;
    }

    public Duration pollInterval() {
        return pollInterval;
    }

    public Duration maxPollInterval() {
        return maxPollInterval;
    }

    public Duration drainTimeout() {
        return drainTimeout;
    }

    /** How claims are shared across the keys of this queue; {@link Fairness#none()} by default. */
    public Fairness fairness() {
        return fairness;
    }

    @Override
    public String toString() {
        return "QueueOptions{name=" + name + ", concurrency=" + concurrency + ", prefetch=" + prefetch
                + ", minDemand=" + minDemand + ", pollInterval=" + pollInterval
                + ", maxPollInterval=" + maxPollInterval + ", drainTimeout=" + drainTimeout
                + (fairness.equals(Fairness.none()) ? "" : ", fairness=" + fairness) + "}";
    }

    public static final class Builder {

        private final String name;
        private int concurrency = DEFAULT_CONCURRENCY;
        private int prefetch = DEFAULT_PREFETCH;
        private int minDemand = DEFAULT_MIN_DEMAND;
        private Duration pollInterval = DEFAULT_POLL_INTERVAL;
        private Duration maxPollInterval = DEFAULT_MAX_POLL_INTERVAL;
        private Duration drainTimeout = DEFAULT_DRAIN_TIMEOUT;
        private Fairness fairness = Fairness.none();

        private Builder(String name) {
            this.name = QueueNames.require("queue name", name);
        }

        public Builder concurrency(int concurrency) {
            this.concurrency = Options.requireAtLeast("concurrency", concurrency, 1);
            return this;
        }

        public Builder prefetch(int prefetch) {
            this.prefetch = Options.requireAtLeast("prefetch", prefetch, 0);
            return this;
        }

        public Builder minDemand(int minDemand) {
            this.minDemand = Options.requireAtLeast("minDemand", minDemand, 1);
            return this;
        }

        public Builder pollInterval(Duration pollInterval) {
            this.pollInterval = Options.requirePositive("pollInterval", pollInterval);
            return this;
        }

        public Builder maxPollInterval(Duration maxPollInterval) {
            this.maxPollInterval = Options.requirePositive("maxPollInterval", maxPollInterval);
            return this;
        }

        public Builder drainTimeout(Duration drainTimeout) {
            this.drainTimeout = Options.requireNonNegative("drainTimeout", drainTimeout);
            return this;
        }

        /** Fair share across the keys of this queue (weights, per-key cap, aging); see {@link Fairness}. */
        public Builder fairness(Fairness fairness) {
            this.fairness = Options.requireNonNull("fairness", fairness);
            return this;
        }

        public QueueOptions build() {
            if (maxPollInterval.compareTo(pollInterval) < 0) {
                throw new IllegalArgumentException("maxPollInterval must be at least pollInterval, was "
                        + maxPollInterval + " < " + pollInterval + " (queue " + name + ")");
            }
            return new QueueOptions(this);
        }
    }
}
