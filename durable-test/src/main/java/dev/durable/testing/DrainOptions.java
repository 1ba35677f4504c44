package dev.durable.testing;

import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * How {@link DurableTesting#drain(dev.durable.DurableEngine, DrainOptions)} drains. By default it
 * waits for the instances that are due when it starts (runnable and due within {@link #horizon()},
 * or executing) to settle, park or be scheduled later.
 *
 * <ul>
 *   <li>{@link #withScheduled()}: also runs what is scheduled later, and retries after their
 *       backoff, by moving the engine's {@link TestClock} forward to the next eligible time whenever
 *       the queues are idle; until nothing is runnable at all. Needs an engine built on
 *       {@link TestClock#engineOptions()}. Await deadlines are not advanced through: move the clock
 *       past one yourself ({@link TestClock#advance}).
 *   <li>{@link #withRecursion()}: follows what the runs create (children, jobs their handlers
 *       insert, workflows woken by their children): everything on the engine's queues.
 * </ul>
 */
public final class DrainOptions {

    private static final OptionList<DrainOptions> OPTIONS = new OptionList<>("DrainOptions");

    private static final Option<Boolean> SCHEDULED = OPTIONS.add("scheduled", Boolean.class, false, Checks.notNull(),
            "Whether the drain also runs what is scheduled later, moving the test clock forward.");
    private static final Option<Duration> SCHEDULED_UP_TO = OPTIONS.add("scheduledUpTo", Duration.class, null,
            DrainOptions::checkUpTo, "How far withScheduled may move the clock; unset, as far as there is work.");
    private static final Option<Boolean> RECURSION = OPTIONS.add("recursion", Boolean.class, false, Checks.notNull(),
            "Whether the drain follows what the runs create: everything on the engine's queues.");
    private static final Option<Duration> HORIZON = OPTIONS.add("horizon", Duration.class, DurableTesting.DRAIN_HORIZON,
            Checks.nonNegative(), "Rows due within this much count as due (a short backoff without a test clock).");
    private static final Option<Duration> TIMEOUT = OPTIONS.add("timeout", Duration.class,
            DurableTesting.DEFAULT_DRAIN_TIMEOUT, Checks.positive(), "How long the drain may take before it fails the test.");

    private static final DrainOptions DEFAULTS = new DrainOptions(OptionValues.none());

    private final OptionValues values;

    private DrainOptions(OptionValues values) {
        this.values = values;
    }

    /** What is due now, within {@link DurableTesting#DRAIN_HORIZON}, up to 30 s. */
    public static DrainOptions defaults() {
        return DEFAULTS;
    }

    /** Every option, with its name, type, default, rule and description. */
    public static OptionList<DrainOptions> options() {
        return OPTIONS;
    }

    /** These options with {@code option} set to {@code value}: the same as the option's own method. */
    public <T> DrainOptions with(Option<T> option, T value) {
        return new DrainOptions(OPTIONS.set(values, option, value));
    }

    public DrainOptions withScheduled() {
        return new DrainOptions(OPTIONS.set(values, SCHEDULED, true).without(SCHEDULED_UP_TO));
    }

    /**
     * As {@link #withScheduled()}, moving the clock at most {@code upTo} past where it was when the
     * drain began: what is scheduled later stays. Use it with {@link #withRecursion()} when runs
     * schedule more runs (a recurring job's next run, a job that re-enqueues itself), which would
     * otherwise keep the drain going until its timeout.
     */
    public DrainOptions withScheduled(Duration upTo) {
        return with(SCHEDULED_UP_TO, upTo).with(SCHEDULED, true);
    }

    public DrainOptions withRecursion() {
        return with(RECURSION, true);
    }

    /** Rows due within this much count as due (a short backoff without a test clock). */
    public DrainOptions horizon(Duration horizon) {
        return with(HORIZON, horizon);
    }

    /** How long the drain may take before it fails the test. */
    public DrainOptions timeout(Duration timeout) {
        return with(TIMEOUT, timeout);
    }

    public boolean scheduled() {
        return values.get(SCHEDULED);
    }

    /** How far withScheduled may move the clock; null for as far as there is work. */
    public @Nullable Duration scheduledUpTo() {
        return values.get(SCHEDULED_UP_TO);
    }

    public boolean recursion() {
        return values.get(RECURSION);
    }

    public Duration horizon() {
        return values.get(HORIZON);
    }

    public Duration timeout() {
        return values.get(TIMEOUT);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof DrainOptions that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    /** Named as {@link #withScheduled(Duration)}'s argument is. */
    private static Duration checkUpTo(String option, Duration upTo) {
        return Checks.requireNonNegative("upTo", upTo);
    }
}
