package dev.durable.testing;

import java.time.Duration;
import java.util.Objects;
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

    private final boolean scheduled;
    private final @Nullable Duration scheduledUpTo;
    private final boolean recursion;
    private final Duration horizon;
    private final Duration timeout;

    private DrainOptions(boolean scheduled, @Nullable Duration scheduledUpTo, boolean recursion, Duration horizon,
            Duration timeout) {
        this.scheduled = scheduled;
        this.scheduledUpTo = scheduledUpTo;
        this.recursion = recursion;
        this.horizon = horizon;
        this.timeout = timeout;
    }

    /** What is due now, within {@link DurableTesting#DRAIN_HORIZON}, up to 30 s. */
    public static DrainOptions defaults() {
        return new DrainOptions(false, null, false, DurableTesting.DRAIN_HORIZON, DurableTesting.DEFAULT_DRAIN_TIMEOUT);
    }

    public DrainOptions withScheduled() {
        return new DrainOptions(true, null, recursion, horizon, timeout);
    }

    /**
     * As {@link #withScheduled()}, moving the clock at most {@code upTo} past where it was when the
     * drain began: what is scheduled later stays. Use it with {@link #withRecursion()} when runs
     * schedule more runs (a recurring job's next run, a job that re-enqueues itself), which would
     * otherwise keep the drain going until its timeout.
     */
    public DrainOptions withScheduled(Duration upTo) {
        if (upTo.isNegative()) {
            throw new IllegalArgumentException("upTo must not be negative, was " + upTo);
        }
        return new DrainOptions(true, upTo, recursion, horizon, timeout);
    }

    public DrainOptions withRecursion() {
        return new DrainOptions(scheduled, scheduledUpTo, true, horizon, timeout);
    }

    /** Rows due within this much count as due (a short backoff without a test clock). */
    public DrainOptions horizon(Duration horizon) {
        if (horizon.isNegative()) {
            throw new IllegalArgumentException("horizon must not be negative, was " + horizon);
        }
        return new DrainOptions(scheduled, scheduledUpTo, recursion, horizon, timeout);
    }

    /** How long the drain may take before it fails the test. */
    public DrainOptions timeout(Duration timeout) {
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, was " + timeout);
        }
        return new DrainOptions(scheduled, scheduledUpTo, recursion, horizon, Objects.requireNonNull(timeout));
    }

    public boolean scheduled() {
        return scheduled;
    }

    /** How far withScheduled may move the clock; null for as far as there is work. */
    public @Nullable Duration scheduledUpTo() {
        return scheduledUpTo;
    }

    public boolean recursion() {
        return recursion;
    }

    public Duration horizon() {
        return horizon;
    }

    public Duration timeout() {
        return timeout;
    }

    @Override
    public String toString() {
        return "DrainOptions{scheduled=" + scheduled + (scheduledUpTo != null ? " up to " + scheduledUpTo : "")
                + ", recursion=" + recursion + ", horizon=" + horizon
                + ", timeout=" + timeout + "}";
    }
}
