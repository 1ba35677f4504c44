package dev.durable;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * How an instance of a workflow moves from version {@code n} to {@code n + 1}: a change of its state
 * and a mapping of the steps version {@code n + 1} renamed or removed. Registered on
 * {@link WorkflowDefinition.Builder#migration}; an engine applies the chain of them to an older
 * instance when it claims it, or in bulk ({@code admin().migrate(type)}). Immutable.
 *
 * <pre>{@code
 * record OrderV1(String id, long cents) {}
 * record Order(String id, long cents, String currency) {}
 *
 * WorkflowDefinition.builder("checkout", Order.class).version(2)
 *     .step("reserve", ...).step("pay", ...)
 *     .migration(StateMigration.from(1)
 *         .state(OrderV1.class, old -> new Order(old.id(), old.cents(), "EUR"))
 *         .mapStep("charge", "pay"))      // v1's "charge" is v2's "pay"
 *     .build();
 * }</pre>
 *
 * The old state is decoded as the class given to {@link #state} by the engine's codec, so it may
 * be a class kept only for this purpose, or {@code JsonNode.class} (with the default Jackson codec)
 * to edit the JSON tree; what the function returns is encoded as the new state. A null state stays
 * null unless the function makes one.
 */
public final class StateMigration {

    private final int fromVersion;
    private final @Nullable Class<?> oldType;
    private final @Nullable Function<Object, ?> change;
    private final Map<String, String> steps;

    private StateMigration(int fromVersion, @Nullable Class<?> oldType, @Nullable Function<Object, ?> change,
            Map<String, String> steps) {
        this.fromVersion = fromVersion;
        this.oldType = oldType;
        this.change = change;
        this.steps = Map.copyOf(steps);
    }

    /** The migration from version {@code fromVersion} (at least 1) to the next one: state and steps unchanged until said. */
    public static StateMigration from(int fromVersion) {
        return new StateMigration(Options.requireAtLeast("fromVersion", fromVersion, 1), null, null, Map.of());
    }

    /**
     * The state changes: the old state, decoded as {@code oldType}, becomes what {@code change}
     * returns. A change that throws fails the migration as a step's error would (retried with the
     * type's backoff, then failed), and leaves the instance as it was.
     */
    @SuppressWarnings("unchecked")
    public <O> StateMigration state(Class<O> oldType, Function<? super O, ?> change) {
        Options.requireNonNull("oldType", oldType);
        Options.requireNonNull("change", change);
        return new StateMigration(fromVersion, oldType, (Function<Object, ?>) change, steps);
    }

    /**
     * Instances of the old version at {@code oldStep} continue at {@code newStep}: a renamed step,
     * or a removed one sent to the step that takes its place. A step of the old version the new one
     * lacks and no mapping covers has no path: such an instance is handed back unrun (no attempt
     * spent, the reason in its last error) for a node that still runs the old version.
     */
    public StateMigration mapStep(String oldStep, String newStep) {
        Options.requireName("oldStep", oldStep);
        Options.requireName("newStep", newStep);
        if (steps.containsKey(oldStep)) {
            throw new IllegalArgumentException("step '" + oldStep + "' is mapped twice in the migration from version "
                    + fromVersion);
        }
        Map<String, String> more = new LinkedHashMap<>(steps);
        more.put(oldStep, newStep);
        return new StateMigration(fromVersion, oldType, change, more);
    }

    public int fromVersion() {
        return fromVersion;
    }

    public int toVersion() {
        return fromVersion + 1;
    }

    /** Old step -> new step. */
    public Map<String, String> steps() {
        return steps;
    }

    /** The step an instance at {@code step} continues at in the next version. */
    public String step(String step) {
        return steps.getOrDefault(step, step);
    }

    /**
     * The state JSON of the next version from that of this one, through {@code codec}; what the
     * engine does with a migrating instance. Errors of the codec or the change are thrown as they are.
     */
    public @Nullable String migrateState(@Nullable String json, JsonCodec codec) {
        if (change == null || oldType == null) {
            return json;
        }
        Object old = json == null ? null : codec.decode(json, oldType);
        Object changed = change.apply(old);
        return changed == null ? null : codec.encode(changed);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof StateMigration that && fromVersion == that.fromVersion
                && Objects.equals(oldType, that.oldType) && Objects.equals(change, that.change)
                && steps.equals(that.steps);
    }

    @Override
    public int hashCode() {
        return Objects.hash(fromVersion, oldType, change, steps);
    }

    @Override
    public String toString() {
        return "StateMigration{from=" + fromVersion + ", to=" + toVersion()
                + (oldType == null ? "" : ", state from " + oldType.getSimpleName()) + ", steps=" + steps + "}";
    }
}
