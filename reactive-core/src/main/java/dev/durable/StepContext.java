package dev.durable;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * What a workflow step sees: its instance, its attempt, its typed state, the signals it awaited
 * (empty when the await timed out or there was none), its whole inbox and, at a join, its children.
 * The inbox and children are read when the row is claimed.
 */
public final class StepContext<S> {

    private final long id;
    private final String type;
    private final String queue;
    private final String step;
    private final int attempt;
    private final int maxAttempts;
    private final @Nullable S state;
    private final boolean awaitedSignals;
    private final List<Signal> signals;
    private final List<Signal> inbox;
    private final List<Child> children;
    private final JsonCodec codec;
    private final Cancellation cancellation;
    private final String worker;
    private final long claimStamp;

    /** A context that is never cancelled: public so tests of step handlers can make one. */
    public StepContext(long id, String type, String queue, String step, int attempt, int maxAttempts,
            @Nullable S state, boolean awaitedSignals, List<Signal> signals, List<Signal> inbox,
            List<Child> children, JsonCodec codec) {
        this(id, type, queue, step, attempt, maxAttempts, state, awaitedSignals, signals, inbox, children, codec,
                Cancellation.NEVER);
    }

    /** A context made by hand, with a cancellation the test controls. */
    public StepContext(long id, String type, String queue, String step, int attempt, int maxAttempts,
            @Nullable S state, boolean awaitedSignals, List<Signal> signals, List<Signal> inbox,
            List<Child> children, JsonCodec codec, Cancellation cancellation) {
        this(id, type, queue, step, attempt, maxAttempts, state, awaitedSignals, signals, inbox, children, codec,
                cancellation, "");
    }

    /** A context claimed by {@code worker} without a stamp. */
    public StepContext(long id, String type, String queue, String step, int attempt, int maxAttempts,
            @Nullable S state, boolean awaitedSignals, List<Signal> signals, List<Signal> inbox,
            List<Child> children, JsonCodec codec, Cancellation cancellation, String worker) {
        this(id, type, queue, step, attempt, maxAttempts, state, awaitedSignals, signals, inbox, children, codec,
                cancellation, worker, 0);
    }

    /** Made by the engine for each step, claimed by {@code worker} with {@code claimStamp} ({@link Claim#stamp()}). */
    public StepContext(long id, String type, String queue, String step, int attempt, int maxAttempts,
            @Nullable S state, boolean awaitedSignals, List<Signal> signals, List<Signal> inbox,
            List<Child> children, JsonCodec codec, Cancellation cancellation, String worker, long claimStamp) {
        this.id = id;
        this.type = type;
        this.queue = queue;
        this.step = step;
        this.attempt = attempt;
        this.maxAttempts = maxAttempts;
        this.state = state;
        this.awaitedSignals = awaitedSignals;
        this.signals = List.copyOf(signals);
        this.inbox = List.copyOf(inbox);
        this.children = List.copyOf(children);
        this.codec = codec;
        this.cancellation = cancellation;
        this.worker = worker;
        this.claimStamp = claimStamp;
    }

    /** This run's claim: what completing it from a caller's transaction is guarded by ({@link DurableEngine#complete}). */
    public Claim claim() {
        return new Claim(id, type, step, worker, attempt, claimStamp);
    }

    /** Whether this step should stop: its instance was cancelled or the run lost its claim. */
    public Cancellation cancellation() {
        return cancellation;
    }

    public long id() {
        return id;
    }

    public String type() {
        return type;
    }

    public String queue() {
        return queue;
    }

    public String step() {
        return step;
    }

    /** The attempt of this step, from 1. */
    public int attempt() {
        return attempt;
    }

    public int maxAttempts() {
        return maxAttempts;
    }

    /** The state committed by the previous step (the workflow's initial state on the first). */
    public @Nullable S state() {
        return state;
    }

    /**
     * The signals this step was woken by: those in the inbox whose names the previous step awaited.
     * They are removed from the inbox when this step's outcome commits.
     */
    public List<Signal> signals() {
        return signals;
    }

    /** The first awaited signal of that name, if one came. */
    public @Nullable Signal signal(String name) {
        for (Signal signal : signals) {
            if (signal.name().equals(name)) {
                return signal;
            }
        }
        return null;
    }

    /** True when the previous step awaited signals and none came before its timeout. */
    public boolean awaitTimedOut() {
        return awaitedSignals && signals.isEmpty();
    }

    /** Every signal in the inbox, awaited or not, oldest first. */
    public List<Signal> inbox() {
        return inbox;
    }

    /** The children of this instance, at a join: each with its status, result and last error. */
    public List<Child> children() {
        return children;
    }

    /** A signal's payload as {@code type}. */
    public <T> @Nullable T payload(Signal signal, Class<T> type) {
        return signal.payloadJson() == null ? null : codec.decode(signal.payloadJson(), type);
    }

    /** A child's result as {@code type}. */
    public <T> @Nullable T result(Child child, Class<T> type) {
        return child.resultJson() == null ? null : codec.decode(child.resultJson(), type);
    }
}
