package dev.durable;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * Fair share across the keys (typically tenants) of one queue: when the queue is contended, each
 * pick shares its claims among the keys with due work in proportion to their weights (stride
 * scheduling: a key's virtual pass advances by 1 / weight per claim, the pick serves the least
 * passes first), so one key's backlog never delays another key's first job by more than a pick or
 * two, and an idle key's share goes to the others. Rows carry their key ({@link
 * JobRequest#fairnessKey}); a row without one shares the key {@code ""}.
 *
 * <p>Options: weights (a static map, a function of the key, and a default, 1 unless set), a cap of executing claims per
 * key across the fleet (static, or a function of the key), and priority aging (a runnable row waiting longer than a step gains one
 * priority level per step, down to a floor). Immutable; build with {@link #builder()}.
 */
public final class Fairness {

    /** How often a queue's scheduler asks the weigher again for the keys with work. */
    public static final Duration WEIGHER_REFRESH = Duration.ofSeconds(5);

    /** The largest weight: claims are shared in ratios up to a million to one. */
    public static final double MAX_WEIGHT = 1_000_000;

    private static final Fairness NONE = new Fairness(false, Map.of(), null, 1, 0, null, null, 0);

    private final boolean enabled;
    private final Map<String, Double> weights;
    private final @Nullable Function<String, ? extends @Nullable Number> weigher;
    private final double defaultWeight;
    private final int maxExecutingPerKey;
    private final @Nullable Function<String, ? extends @Nullable Integer> keyCaps;
    private final @Nullable Duration agingStep;
    private final int agingFloor;

    private Fairness(boolean enabled, Map<String, Double> weights,
            @Nullable Function<String, ? extends @Nullable Number> weigher, double defaultWeight, int maxExecutingPerKey,
            @Nullable Function<String, ? extends @Nullable Integer> keyCaps, @Nullable Duration agingStep,
            int agingFloor) {
        this.enabled = enabled;
        this.weights = Map.copyOf(weights);
        this.weigher = weigher;
        this.defaultWeight = defaultWeight;
        this.maxExecutingPerKey = maxExecutingPerKey;
        this.keyCaps = keyCaps;
        this.agingStep = agingStep;
        this.agingFloor = agingFloor;
    }

    /** No fairness: the queue's pick is the plain urgency-order pick. The default. */
    public static Fairness none() {
        return NONE;
    }

    /**
     * Priority aging alone, on a queue without fair share: its pick stays the plain one, and a
     * runnable row gains a level per {@code step} it waits, down to {@code floor} (see
     * {@link Builder#aging}).
     */
    public static Fairness priorityAgingOnly(Duration step, int floor) {
        Fairness aging = builder().aging(step, floor).build();
        return new Fairness(false, Map.of(), null, 1, 0, null, aging.agingStep, aging.agingFloor);
    }

    /** Fairness with every key at weight 1. */
    public static Fairness equalShares() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Whether claims are shared across keys (false for {@link #none()} and {@link #priorityAgingOnly}). */
    public boolean enabled() {
        return enabled;
    }

    /**
     * The name of the gate that caps the executing claims per key of a fair queue: the engine
     * declares it with the queue, and a row of the queue without a gate or concurrency key of its own
     * holds it, keyed by its fairness key, so the cap is admitted in the pick like any gate.
     */
    public static String capGate(String queue) {
        return "fairness." + queue;
    }

    /** The weights given by key; other keys weigh {@link #defaultWeight()}. */
    public Map<String, Double> weights() {
        return weights;
    }

    public double defaultWeight() {
        return defaultWeight;
    }

    /** The function that weighs keys without a static weight, or null. */
    public @Nullable Function<String, ? extends @Nullable Number> weigher() {
        return weigher;
    }

    /**
     * The weight of {@code key}: its static weight, else the weigher's answer (when it gives a valid
     * weight), else the default.
     */
    public double weight(String key) {
        Double fixed = weights.get(key);
        if (fixed != null) {
            return fixed;
        }
        Number weighed = weigher == null ? null : weigher.apply(key);
        double value = weighed == null ? defaultWeight : weighed.doubleValue();
        return value > 0 && value <= MAX_WEIGHT ? value : defaultWeight;
    }

    /**
     * At most this many claims of one key execute at once across the fleet; 0 for no cap. Rows with
     * a gate or concurrency key of their own are not counted (a row holds one gate). A key the cap
     * function ({@link #keyCaps()}) gives a cap is held to that one instead.
     */
    public int maxExecutingPerKey() {
        return maxExecutingPerKey;
    }

    /** The function that caps keys one by one, or null. */
    public @Nullable Function<String, ? extends @Nullable Integer> keyCaps() {
        return keyCaps;
    }

    /** Whether the queue caps its keys' executing claims: a static cap, a cap function, or both. */
    public boolean capsKeys() {
        return maxExecutingPerKey > 0 || keyCaps != null;
    }

    /**
     * The capacity the queue's cap gate ({@link #capGate}) is declared with: the static cap, else, for
     * keys capped by the function alone, {@link Integer#MAX_VALUE} (a key it gives no cap has none);
     * 0 when the queue caps no keys.
     */
    public int capGateCapacity() {
        return maxExecutingPerKey > 0 ? maxExecutingPerKey : keyCaps != null ? Integer.MAX_VALUE : 0;
    }

    /**
     * The cap function's answer for {@code key} when it is a cap (at least 1), else null: the key is
     * held to {@link #maxExecutingPerKey()} (no cap when that is 0).
     */
    public @Nullable Integer keyCap(String key) {
        Integer cap = keyCaps == null ? null : keyCaps.apply(key);
        return cap != null && cap >= 1 ? cap : null;
    }

    /** The wait after which a runnable row gains one priority level, or null for no aging. */
    public @Nullable Duration agingStep() {
        return agingStep;
    }

    /** The most urgent priority aging lifts a row to. */
    public int agingFloor() {
        return agingFloor;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof Fairness f && enabled == f.enabled && weights.equals(f.weights)
                && Objects.equals(weigher, f.weigher)
                && defaultWeight == f.defaultWeight && maxExecutingPerKey == f.maxExecutingPerKey
                && Objects.equals(keyCaps, f.keyCaps)
                && Objects.equals(agingStep, f.agingStep) && agingFloor == f.agingFloor;
    }

    @Override
    public int hashCode() {
        return Objects.hash(enabled, weights, weigher, defaultWeight, maxExecutingPerKey, keyCaps, agingStep,
                agingFloor);
    }

    @Override
    public String toString() {
        if (!enabled) {
            return agingStep == null ? "Fairness{none}"
                    : "Fairness{agingStep=" + agingStep + ", agingFloor=" + agingFloor + "}";
        }
        return "Fairness{weights=" + weights + ", defaultWeight=" + defaultWeight
                + (weigher != null ? ", weigher=" + weigher : "")
                + ", maxExecutingPerKey=" + maxExecutingPerKey + (keyCaps != null ? ", keyCaps=" + keyCaps : "")
                + ", agingStep=" + agingStep
                + ", agingFloor=" + agingFloor + "}";
    }

    public static final class Builder {

        private final Map<String, Double> weights = new LinkedHashMap<>();
        private @Nullable Function<String, ? extends @Nullable Number> weigher;
        private double defaultWeight = 1;
        private int maxExecutingPerKey;
        private @Nullable Function<String, ? extends @Nullable Integer> keyCaps;
        private @Nullable Duration agingStep;
        private int agingFloor = JobRequest.MIN_PRIORITY;

        private Builder() {
        }

        /** The weight of one key (greater than 0, at most {@link #MAX_WEIGHT}). */
        public Builder weight(String key, double weight) {
            weights.put(requireKey(key), requireWeight("weight of key '" + key + "'", weight));
            return this;
        }

        /** The weights of these keys, as {@link #weight(String, double)} each. */
        public Builder weights(Map<String, ? extends Number> weights) {
            Objects.requireNonNull(weights, "weights");
            weights.forEach((key, weight) -> weight(key, Objects.requireNonNull(weight, "weight").doubleValue()));
            return this;
        }

        /**
         * Weighs keys without a static weight, e.g. by plan tier: null, or a value out of (0,
         * {@link #MAX_WEIGHT}], means the default. The scheduler of the queue calls it for the keys
         * with work (at most 1,000, those next in line) every {@link #WEIGHER_REFRESH} and stores the
         * answers with the keys, where every engine's pick reads them; a new key weighs the default
         * until then. It runs on the scheduler's thread: it must be quick and must not block (look a
         * tier up in a map the application keeps current).
         */
        public Builder weigher(Function<String, ? extends @Nullable Number> weigher) {
            this.weigher = Objects.requireNonNull(weigher, "weigher");
            return this;
        }

        /** The weight of keys without one of their own; 1 unless set. */
        public Builder defaultWeight(double weight) {
            this.defaultWeight = requireWeight("defaultWeight", weight);
            return this;
        }

        /**
         * At most this many executing claims per key across the fleet (at least 1); unset: no cap.
         * With a cap function too, the cap of the keys it gives none.
         */
        public Builder maxExecutingPerKey(int max) {
            this.maxExecutingPerKey = Options.requireAtLeast("maxExecutingPerKey", max, 1);
            return this;
        }

        /**
         * Caps keys one by one, e.g. by plan tier: at most the function's answer of a key's claims
         * execute at once across the fleet. Null, or an answer below 1, means the static cap
         * ({@link #maxExecutingPerKey(int)}; no cap without one). Like the {@link #weigher}, the
         * scheduler of the queue asks it about the keys with work (at most 1,000, those next in line)
         * before its first pick and every {@link #WEIGHER_REFRESH}, and stores the answers with the
         * keys, where every engine's pick admits on them: a changed cap holds within a refresh (a
         * lowered one as the key's claims over it finish). A key the function was never asked about
         * (one that just got work) is held to one claim until it is: a pick that walks such a key
         * makes its scheduler ask before the next pick (at most once a second), so no key ever runs
         * over the cap the function gives it. Quick and non-blocking, as the weigher.
         */
        public Builder maxExecutingPerKey(Function<String, ? extends @Nullable Integer> caps) {
            this.keyCaps = Objects.requireNonNull(caps, "maxExecutingPerKey function");
            return this;
        }

        /**
         * Priority aging: a runnable row gains one priority level (its number drops by one) per
         * {@code step} it has waited past its eligible time (database clock), but never below
         * {@code floor}, so low priorities cannot starve for ever. The scheduler's pick ages its queue
         * once a second (or once a step if shorter), up to 1,000 rows at a time; each level gained
         * moves the row's eligible time one step later (the wait it spent), so within its new level it
         * sorts by when it got there.
         */
        public Builder aging(Duration step, int floor) {
            this.agingStep = Options.requirePositive("aging step", step);
            if (floor < JobRequest.MIN_PRIORITY || floor > JobRequest.MAX_PRIORITY) {
                throw new IllegalArgumentException("aging floor must be a priority from " + JobRequest.MIN_PRIORITY
                        + " to " + JobRequest.MAX_PRIORITY + ", was " + floor);
            }
            this.agingFloor = floor;
            return this;
        }

        public Fairness build() {
            return new Fairness(true, weights, weigher, defaultWeight, maxExecutingPerKey, keyCaps, agingStep,
                    agingFloor);
        }

        private static String requireKey(String key) {
            Objects.requireNonNull(key, "fairness key");
            if (key.getBytes(StandardCharsets.UTF_8).length > JobRequest.MAX_KEY_BYTES) {
                throw new IllegalArgumentException("a fairness key must be at most " + JobRequest.MAX_KEY_BYTES
                        + " bytes in UTF-8, was " + key.getBytes(StandardCharsets.UTF_8).length);
            }
            return key;
        }

        private static double requireWeight(String option, double weight) {
            if (!(weight > 0) || weight > MAX_WEIGHT) {
                throw new IllegalArgumentException(option + " must be greater than 0 and at most " + MAX_WEIGHT
                        + ", was " + weight);
            }
            return weight;
        }
    }
}
