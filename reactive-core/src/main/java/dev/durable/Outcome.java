package dev.durable;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * What a workflow step decided. Committed to the database before the workflow proceeds.
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
    private @Nullable String gate;
    private RateChange rateChange = RateChange.KEEP;
    private @Nullable String rateLimit;
    private int rateWeight = 1;
    private @Nullable String ratePartition;

    private Outcome(Kind kind, @Nullable String step, @Nullable S state, @Nullable Object result,
            @Nullable String error, @Nullable Duration delay, Set<String> signals, @Nullable Duration timeout,
            List<JobRequest> children, boolean inline, KeyChange keyChange, @Nullable String concurrencyKey) {
        this.kind = kind;
        this.step = step;
        this.state = state;
        this.result = result;
        this.error = error;
        this.delay = delay;
        this.signals = signals;
        this.timeout = timeout;
        this.children = children;
        this.inline = inline;
        this.keyChange = keyChange;
        this.concurrencyKey = concurrencyKey;
    }

    private static <S> Outcome<S> of(Kind kind, @Nullable String step, @Nullable S state) {
        return new Outcome<>(kind, step, state, null, null, null, Set.of(), null, List.of(), false,
                KeyChange.KEEP, null);
    }

    /** Go on with {@code step} and {@code state}, through the queue (a new pick). */
    public static <S> Outcome<S> next(String step, S state) {
        return of(Kind.NEXT, requireStep(step), state);
    }

    /** Run the same step again after {@code after}; the attempt is not spent. */
    public static <S> Outcome<S> retry(Duration after) {
        if (after == null || after.isNegative()) {
            throw new IllegalArgumentException("after must not be negative, was " + after);
        }
        return new Outcome<>(Kind.RETRY, null, null, null, null, after, Set.of(), null, List.of(), false,
                KeyChange.KEEP, null);
    }

    /** Park until one of {@code signals} arrives, then run {@code next} with {@code state}. */
    public static <S> Outcome<S> await(Set<String> signals, String next, S state) {
        if (signals == null || signals.isEmpty()) {
            throw new IllegalArgumentException("signals must name at least one signal");
        }
        for (String signal : signals) {
            if (signal == null || signal.isBlank() || signal.contains(",")) {
                throw new IllegalArgumentException("signal names must not be blank or contain ',', was '" + signal + "'");
            }
        }
        return new Outcome<>(Kind.AWAIT, requireStep(next), state, null, null, null, Set.copyOf(signals), null,
                List.of(), false, KeyChange.KEEP, null);
    }

    /**
     * As {@link #await(Set, String, Object)}, but resume {@code next} with no awaited signals once
     * {@code timeout} has passed.
     */
    public static <S> Outcome<S> await(Set<String> signals, String next, S state, Duration timeout) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, was " + timeout);
        }
        Outcome<S> await = await(signals, next, state);
        return new Outcome<>(Kind.AWAIT, await.step, state, null, null, null, await.signals, timeout, List.of(),
                false, KeyChange.KEEP, null);
    }

    /**
     * Insert {@code children} (each a job or workflow request) and park until all have settled,
     * then run {@code joinStep} with {@code state}. With no children the join runs at once.
     */
    public static <S> Outcome<S> spawnChildren(List<JobRequest> children, String joinStep, S state) {
        if (children == null) {
            throw new IllegalArgumentException("children must not be null");
        }
        return new Outcome<>(Kind.SPAWN, requireStep(joinStep), state, null, null, null, Set.of(), null,
                List.copyOf(children), false, KeyChange.KEEP, null);
    }

    /** The instance is done with {@code result} (null for none). */
    public static <S> Outcome<S> done(@Nullable Object result) {
        return new Outcome<>(Kind.DONE, null, null, result, null, null, Set.of(), null, List.of(), false,
                KeyChange.KEEP, null);
    }

    /** The instance failed with {@code error}, at once, whatever attempts it has left. */
    public static <S> Outcome<S> fail(String error) {
        if (error == null || error.isBlank()) {
            throw new IllegalArgumentException("error must not be blank");
        }
        return new Outcome<>(Kind.FAIL, null, null, null, error, null, Set.of(), null, List.of(), false,
                KeyChange.KEEP, null);
    }

    /** The instance cancels itself. */
    public static <S> Outcome<S> cancel() {
        return of(Kind.CANCEL, null, null);
    }

    /**
     * For {@code next}: continue on the same claim at once, with no pick in between. The new state
     * is committed first, so a crash resumes from it.
     */
    public Outcome<S> inline() {
        requireKind(Kind.NEXT, "inline");
        if (keyChange == KeyChange.GATE || rateChange == RateChange.SET) {
            throw new IllegalArgumentException("a step with a gate or a rate limit is admitted by a pick: it cannot be inline");
        }
        Outcome<S> copy = new Outcome<>(kind, step, state, result, error, delay, signals, timeout, children, true,
                keyChange, concurrencyKey);
        copy.rateChange = rateChange;
        return copy;
    }

    /** For {@code next}: from the next step on, hold this concurrency key instead. */
    public Outcome<S> concurrencyKey(String key) {
        requireKind(Kind.NEXT, "concurrencyKey");
        if (key == null || key.isBlank() || key.length() > 1024) {
            throw new IllegalArgumentException("concurrencyKey must be 1 to 1024 characters and not blank");
        }
        Outcome<S> copy = copy(KeyChange.SET, key);
        copy.gate = null;
        return copy;
    }

    /** For {@code next}: from the next step on, hold no concurrency key. */
    public Outcome<S> releaseConcurrencyKey() {
        requireKind(Kind.NEXT, "releaseConcurrencyKey");
        Outcome<S> copy = copy(KeyChange.RELEASE, null);
        copy.gate = null;
        return copy;
    }

    /**
     * For {@code next}: from the next step on, count against the named gate under {@code key}. The
     * next step is admitted by a pick, so a gate change cannot be inline.
     */
    public Outcome<S> gate(String gate, String key) {
        requireKind(Kind.NEXT, "gate");
        if (inline) {
            throw new IllegalArgumentException("a gate change goes through the queue: it cannot be inline");
        }
        if (gate == null || gate.isBlank() || key == null || key.length() > 1024) {
            throw new IllegalArgumentException("gate must not be blank and its key must be at most 1024 characters");
        }
        Outcome<S> copy = copy(KeyChange.GATE, key);
        copy.gate = gate;
        return copy;
    }

    /** For {@code next}: the next step is admitted by the named rate limit, with this weight and partition. */
    public Outcome<S> rateLimit(String rateLimit, int weight, @Nullable String partition) {
        requireKind(Kind.NEXT, "rateLimit");
        if (inline) {
            throw new IllegalArgumentException("a rate-limited step is admitted by a pick: it cannot be inline");
        }
        if (rateLimit == null || rateLimit.isBlank() || weight < 1) {
            throw new IllegalArgumentException("rateLimit must not be blank and weight must be at least 1");
        }
        if (partition != null && (partition.isBlank() || partition.length() > 1024)) {
            throw new IllegalArgumentException("partition must be 1 to 1024 characters and not blank, or null");
        }
        Outcome<S> copy = copy(keyChange, concurrencyKey);
        copy.gate = gate;
        copy.rateChange = RateChange.SET;
        copy.rateLimit = rateLimit;
        copy.rateWeight = weight;
        copy.ratePartition = partition;
        return copy;
    }

    /** For {@code next}: the next step is not rate limited. */
    public Outcome<S> noRateLimit() {
        requireKind(Kind.NEXT, "noRateLimit");
        Outcome<S> copy = copy(keyChange, concurrencyKey);
        copy.gate = gate;
        copy.rateChange = RateChange.CLEAR;
        return copy;
    }

    private Outcome<S> copy(KeyChange keyChange, @Nullable String concurrencyKey) {
        Outcome<S> copy = new Outcome<>(kind, step, state, result, error, delay, signals, timeout, children, inline,
                keyChange, concurrencyKey);
        copy.gate = gate;
        copy.rateChange = rateChange;
        copy.rateLimit = rateLimit;
        copy.rateWeight = rateWeight;
        copy.ratePartition = ratePartition;
        return copy;
    }

    public @Nullable String gate() {
        return gate;
    }

    public RateChange rateChange() {
        return rateChange;
    }

    public @Nullable String rateLimit() {
        return rateLimit;
    }

    public int rateWeight() {
        return rateWeight;
    }

    public @Nullable String ratePartition() {
        return ratePartition;
    }

    /** For {@code next}: not before {@code after} has passed (ignored with inline). */
    public Outcome<S> after(Duration after) {
        requireKind(Kind.NEXT, "after");
        if (after == null || after.isNegative()) {
            throw new IllegalArgumentException("after must not be negative, was " + after);
        }
        Outcome<S> copy = new Outcome<>(kind, step, state, result, error, after, signals, timeout, children, inline,
                keyChange, concurrencyKey);
        copy.gate = gate;
        copy.rateChange = rateChange;
        copy.rateLimit = rateLimit;
        copy.rateWeight = rateWeight;
        copy.ratePartition = ratePartition;
        return copy;
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

    private void requireKind(Kind expected, String option) {
        if (kind != expected) {
            throw new IllegalArgumentException(option + " applies to " + expected + " outcomes, not " + kind);
        }
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
