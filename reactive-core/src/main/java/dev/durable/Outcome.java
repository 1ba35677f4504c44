package dev.durable;

import dev.durable.internal.Keys;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * What a workflow step decided. Committed to the database before the workflow proceeds. An
 * immutable value: every option returns a new outcome, and a combination that cannot be honoured
 * (an inline step that waits, or that takes a gate or rate limit a pick must admit) is refused with
 * an {@link IllegalArgumentException} when it is made, never silently ignored.
 *
 * <ul>
 *   <li>{@link #next}: go on with another step and a new state (optionally inline, on the same
 *       claim, and with a new concurrency key or none);
 *   <li>{@link #retry}: run this step again after a while, without spending an attempt;
 *   <li>{@link #await}: park until one of the named signals arrives (or the timeout passes), then
 *       run {@code next};
 *   <li>{@link #spawnChildren}: insert children and park until every one has settled, then run the
 *       join step, which sees each child's status, result and last error;
 *   <li>{@link #done}, {@link #fail}, {@link #cancel}: end the instance.
 * </ul>
 *
 * @param <S> the workflow's state type
 */
public final class Outcome<S> {

    /** The kinds of outcome. */
    public enum Kind { NEXT, RETRY, AWAIT, SPAWN, DONE, FAIL, CANCEL }

    /** What a {@code next} does with the instance's concurrency key (the SQL codes are the ordinals). */
    public enum KeyChange { KEEP, SET, RELEASE, GATE }

    /** What a {@code next} does with the instance's rate limit. */
    public enum RateChange { KEEP, SET, CLEAR }

    /** What a {@code next} does with the instance's sliding window (the SQL codes are the ordinals). */
    public enum WindowChange { KEEP, SET, CLEAR }

    /**
     * What a {@code next} does with the instance's fairness key (the SQL codes are the ordinals):
     * CLEAR gives it the queue's default key, as an insert without one gets.
     */
    public enum FairnessChange { KEEP, SET, CLEAR }

    private final Kind kind;
    private final @Nullable String step;
    private final @Nullable S state;
    private final @Nullable Object result;
    private final @Nullable String error;
    private final @Nullable Duration delay;
    private final Set<String> signals;
    private final @Nullable Duration timeout;
    private final List<JobRequest> children;
    private final boolean inline;
    private final KeyChange keyChange;
    private final @Nullable String concurrencyKey;
    private final @Nullable String gate;
    private final RateChange rateChange;
    private final @Nullable RateSlot rateLimit;
    private final WindowChange windowChange;
    private final @Nullable WindowSlot window;
    private final FairnessChange fairnessChange;
    private final @Nullable String fairnessKey;

    private Outcome(Fields<S> f) {
        this.kind = f.kind;
        this.step = f.step;
        this.state = f.state;
        this.result = f.result;
        this.error = f.error;
        this.delay = f.delay;
        this.signals = f.signals;
        this.timeout = f.timeout;
        this.children = f.children;
        this.inline = f.inline;
        this.keyChange = f.keyChange;
        this.concurrencyKey = f.concurrencyKey;
        this.gate = f.gate;
        this.rateChange = f.rateChange;
        this.rateLimit = f.rateLimit;
        this.windowChange = f.windowChange;
        this.window = f.window;
        this.fairnessChange = f.fairnessChange;
        this.fairnessKey = f.fairnessKey;
    }

    /** The fields of an outcome being made or changed: the one place an outcome is copied. */
    private static final class Fields<S> {
        private final Kind kind;
        private @Nullable String step;
        private @Nullable S state;
        private @Nullable Object result;
        private @Nullable String error;
        private @Nullable Duration delay;
        private Set<String> signals = Set.of();
        private @Nullable Duration timeout;
        private List<JobRequest> children = List.of();
        private boolean inline;
        private KeyChange keyChange = KeyChange.KEEP;
        private @Nullable String concurrencyKey;
        private @Nullable String gate;
        private RateChange rateChange = RateChange.KEEP;
        private @Nullable RateSlot rateLimit;
        private WindowChange windowChange = WindowChange.KEEP;
        private @Nullable WindowSlot window;
        private FairnessChange fairnessChange = FairnessChange.KEEP;
        private @Nullable String fairnessKey;

        private Fields(Kind kind) {
            this.kind = kind;
        }

        private Fields(Outcome<S> o) {
            this(o.kind);
            step = o.step;
            state = o.state;
            result = o.result;
            error = o.error;
            delay = o.delay;
            signals = o.signals;
            timeout = o.timeout;
            children = o.children;
            inline = o.inline;
            keyChange = o.keyChange;
            concurrencyKey = o.concurrencyKey;
            gate = o.gate;
            rateChange = o.rateChange;
            rateLimit = o.rateLimit;
            windowChange = o.windowChange;
            window = o.window;
            fairnessChange = o.fairnessChange;
            fairnessKey = o.fairnessKey;
        }

        /** The outcome, once the combination is known to make sense. */
        private Outcome<S> build() {
            if (inline && (keyChange == KeyChange.GATE || rateChange == RateChange.SET
                    || windowChange == WindowChange.SET)) {
                throw new IllegalArgumentException("a step with a new gate, rate limit or window is admitted by a pick:"
                        + " it cannot be inline");
            }
            if (inline && fairnessChange != FairnessChange.KEEP) {
                throw new IllegalArgumentException("a step with a new fairness key is claimed by a pick, under that key:"
                        + " it cannot be inline");
            }
            if (inline && delay != null) {
                throw new IllegalArgumentException("an inline step runs at once: it cannot be inline and run after "
                        + delay);
            }
            return new Outcome<>(this);
        }
    }

    private static <S> Outcome<S> of(Kind kind, java.util.function.Consumer<Fields<S>> fill) {
        Fields<S> fields = new Fields<>(kind);
        fill.accept(fields);
        return fields.build();
    }

    /** A copy of this outcome with a change, checked like a new one. */
    private Outcome<S> with(Kind expected, String option, java.util.function.Consumer<Fields<S>> change) {
        if (kind != expected) {
            throw new IllegalArgumentException(option + " applies to " + expected + " outcomes, not " + kind);
        }
        Fields<S> fields = new Fields<>(this);
        change.accept(fields);
        return fields.build();
    }

    /** Go on with {@code step} and {@code state}, through the queue (a new pick). */
    public static <S> Outcome<S> next(String step, S state) {
        String checked = requireStep(step);
        return of(Kind.NEXT, f -> {
            f.step = checked;
            f.state = state;
        });
    }

    /** Run the same step again after {@code after}; the attempt is not spent. */
    public static <S> Outcome<S> retry(Duration after) {
        Duration checked = requireNotNegative("after", after);
        return of(Kind.RETRY, f -> f.delay = checked);
    }

    /** Park until one of {@code signals} arrives, then run {@code next} with {@code state}. */
    public static <S> Outcome<S> await(Set<String> signals, String next, S state) {
        return awaiting(signals, next, state, null);
    }

    /**
     * As {@link #await(Set, String, Object)}, but resume {@code next} with no awaited signals once
     * {@code timeout} has passed.
     */
    public static <S> Outcome<S> await(Set<String> signals, String next, S state, Duration timeout) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, was " + timeout);
        }
        return awaiting(signals, next, state, timeout);
    }

    private static <S> Outcome<S> awaiting(Set<String> signals, String next, S state, @Nullable Duration timeout) {
        Set<String> names = requireSignals(signals);
        String checked = requireStep(next);
        return of(Kind.AWAIT, f -> {
            f.signals = names;
            f.step = checked;
            f.state = state;
            f.timeout = timeout;
        });
    }

    /**
     * Insert {@code children} (each a job or workflow request) and park until all have settled,
     * then run {@code joinStep} with {@code state}. With no children the join runs at once.
     */
    public static <S> Outcome<S> spawnChildren(List<JobRequest> children, String joinStep, S state) {
        if (children == null) {
            throw new IllegalArgumentException("children must not be null");
        }
        List<JobRequest> copy = List.copyOf(children);
        String checked = requireStep(joinStep);
        return of(Kind.SPAWN, f -> {
            f.children = copy;
            f.step = checked;
            f.state = state;
        });
    }

    /** The instance is done with {@code result} (null for none). */
    public static <S> Outcome<S> done(@Nullable Object result) {
        return of(Kind.DONE, f -> f.result = result);
    }

    /** The instance failed with {@code error}, at once, whatever attempts it has left. */
    public static <S> Outcome<S> fail(String error) {
        if (error == null || error.isBlank()) {
            throw new IllegalArgumentException("error must not be blank");
        }
        return of(Kind.FAIL, f -> f.error = error);
    }

    /** The instance cancels itself. */
    public static <S> Outcome<S> cancel() {
        return of(Kind.CANCEL, f -> { });
    }

    /**
     * For {@code next}: continue on the same claim at once, with no pick in between. The new state
     * is committed first, so a crash resumes from it. Not with {@link #after}, a new
     * {@link #gate}, a {@link #rateLimit}, a {@link #window} or a new {@link #fairnessKey}: those go
     * through the queue.
     */
    public Outcome<S> inline() {
        return with(Kind.NEXT, "inline", f -> f.inline = true);
    }

    /** For {@code next}: from the next step on, hold this concurrency key instead. */
    public Outcome<S> concurrencyKey(String key) {
        String problem = Keys.problem(key);
        if (problem != null) {
            throw new IllegalArgumentException("concurrencyKey " + problem);
        }
        return with(Kind.NEXT, "concurrencyKey", f -> {
            f.keyChange = KeyChange.SET;
            f.concurrencyKey = key;
            f.gate = null;
        });
    }

    /** For {@code next}: from the next step on, hold no concurrency key. */
    public Outcome<S> releaseConcurrencyKey() {
        return with(Kind.NEXT, "releaseConcurrencyKey", f -> {
            f.keyChange = KeyChange.RELEASE;
            f.concurrencyKey = null;
            f.gate = null;
        });
    }

    /**
     * For {@code next}: from the next step on, count against the named gate under {@code key}. The
     * next step is admitted by a pick, so a gate change cannot be inline.
     */
    public Outcome<S> gate(String gate, String key) {
        if (gate == null || gate.isBlank() || key == null || Keys.utf8Length(key) > JobRequest.MAX_KEY_BYTES) {
            throw new IllegalArgumentException("gate must not be blank and its key must be at most "
                    + JobRequest.MAX_KEY_BYTES + " bytes in UTF-8");
        }
        return with(Kind.NEXT, "gate", f -> {
            f.keyChange = KeyChange.GATE;
            f.concurrencyKey = key;
            f.gate = gate;
        });
    }

    /** For {@code next}: the next step is admitted by the named rate limit, with this weight and partition. */
    public Outcome<S> rateLimit(String rateLimit, int weight, @Nullable String partition) {
        if (rateLimit == null || rateLimit.isBlank() || weight < 1) {
            throw new IllegalArgumentException("rateLimit must not be blank and weight must be at least 1");
        }
        if (partition != null && Keys.problem(partition) != null) {
            throw new IllegalArgumentException("partition " + Keys.problem(partition) + " (or null)");
        }
        RateSlot slot = new RateSlot(rateLimit, partition, weight);
        return with(Kind.NEXT, "rateLimit", f -> {
            f.rateChange = RateChange.SET;
            f.rateLimit = slot;
        });
    }

    /** For {@code next}: the next step is not rate limited. */
    public Outcome<S> noRateLimit() {
        return with(Kind.NEXT, "noRateLimit", f -> {
            f.rateChange = RateChange.CLEAR;
            f.rateLimit = null;
        });
    }

    /**
     * For {@code next}: the next step is admitted by sliding window {@code window} too, with this
     * weight and partition (null for none), in place of the window the instance held. Admitted by a
     * pick, so not {@link #inline}.
     */
    public Outcome<S> window(String window, int weight, @Nullable String partition) {
        if (window == null || window.isBlank() || weight < 1) {
            throw new IllegalArgumentException("window must not be blank and weight must be at least 1");
        }
        if (partition != null && Keys.problem(partition) != null) {
            throw new IllegalArgumentException("partition " + Keys.problem(partition) + " (or null)");
        }
        WindowSlot slot = new WindowSlot(window, partition, weight);
        return with(Kind.NEXT, "window", f -> {
            f.windowChange = WindowChange.SET;
            f.window = slot;
        });
    }

    /** For {@code next}: the next step is admitted by no sliding window (it leaves the one it held). */
    public Outcome<S> noWindow() {
        return with(Kind.NEXT, "noWindow", f -> {
            f.windowChange = WindowChange.CLEAR;
            f.window = null;
        });
    }

    /**
     * For {@code next}: the next step is shared under fairness key {@code key} (typically a tenant)
     * instead of the instance's. Claimed by a pick under the new key, so not {@link #inline}; on a
     * queue that caps its keys, the step counts against the new key's cap (unless the instance holds
     * a gate or concurrency key of its own, as at insert).
     */
    public Outcome<S> fairnessKey(String key) {
        String problem = Keys.problem(key);
        if (problem != null) {
            throw new IllegalArgumentException("fairnessKey " + problem);
        }
        return with(Kind.NEXT, "fairnessKey", f -> {
            f.fairnessChange = FairnessChange.SET;
            f.fairnessKey = key;
        });
    }

    /**
     * For {@code next}: the next step leaves its fairness key for the queue's default one (the key ""
     * that rows inserted without a key share on a fair queue). Claimed by a pick, so not {@link #inline}.
     */
    public Outcome<S> defaultFairnessKey() {
        return with(Kind.NEXT, "defaultFairnessKey", f -> {
            f.fairnessChange = FairnessChange.CLEAR;
            f.fairnessKey = null;
        });
    }

    /** For {@code next}: not before {@code after} has passed. Not with {@link #inline}. */
    public Outcome<S> after(Duration after) {
        Duration checked = requireNotNegative("after", after);
        return with(Kind.NEXT, "after", f -> f.delay = checked);
    }

    public @Nullable String gate() {
        return gate;
    }

    public RateChange rateChange() {
        return rateChange;
    }

    /** The rate slot the next step is admitted by, when {@link #rateChange()} sets one. */
    public @Nullable RateSlot rateLimit() {
        return rateLimit;
    }

    public WindowChange windowChange() {
        return windowChange;
    }

    /** The window slot the next step is admitted by, when {@link #windowChange()} sets one. */
    public @Nullable WindowSlot window() {
        return window;
    }

    public FairnessChange fairnessChange() {
        return fairnessChange;
    }

    public @Nullable String fairnessKey() {
        return fairnessKey;
    }

    public Kind kind() {
        return kind;
    }

    public @Nullable String step() {
        return step;
    }

    public @Nullable S state() {
        return state;
    }

    public @Nullable Object result() {
        return result;
    }

    public @Nullable String error() {
        return error;
    }

    public @Nullable Duration delay() {
        return delay;
    }

    public Set<String> signals() {
        return signals;
    }

    public @Nullable Duration timeout() {
        return timeout;
    }

    public List<JobRequest> children() {
        return children;
    }

    public boolean isInline() {
        return inline;
    }

    public KeyChange keyChange() {
        return keyChange;
    }

    public @Nullable String concurrencyKey() {
        return concurrencyKey;
    }

    private static Duration requireNotNegative(String option, Duration value) {
        if (value == null || value.isNegative()) {
            throw new IllegalArgumentException(option + " must not be negative, was " + value);
        }
        return value;
    }

    private static Set<String> requireSignals(Set<String> signals) {
        if (signals == null || signals.isEmpty()) {
            throw new IllegalArgumentException("signals must name at least one signal");
        }
        for (String signal : signals) {
            if (signal == null || signal.isBlank() || signal.contains(",")) {
                throw new IllegalArgumentException("signal names must not be blank or contain ',', was '" + signal + "'");
            }
        }
        return Set.copyOf(signals);
    }

    private static String requireStep(String step) {
        if (step == null || step.isBlank()) {
            throw new IllegalArgumentException("step must not be blank");
        }
        return step;
    }

    @Override
    public String toString() {
        return "Outcome{" + kind + (step != null ? " " + step : "") + (inline ? " inline" : "") + "}";
    }
}
