package dev.durable;

import dev.durable.internal.handler.HandlerWatch;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A workflow type: named steps over a typed state. The first step added is where new instances
 * start. Immutable once built. A new release of a workflow with running instances declares a higher
 * {@link Builder#version} and, to move older instances onto it, {@link StateMigration}s
 * ({@link Builder#migration}); without migrations older instances run as they are.
 *
 * <pre>{@code
 * WorkflowDefinition<Order> checkout = WorkflowDefinition.builder("checkout", Order.class)
 *     .step("reserve", ctx -> inventory.reserve(ctx.state())
 *             .map(ok -> Outcome.await(Set.of("paid"), "ship", ctx.state(), Duration.ofHours(1))))
 *     .step("ship", ctx -> ctx.signals().isEmpty()
 *             ? Mono.just(Outcome.fail("not paid in time"))
 *             : Mono.just(Outcome.spawnChildren(shipments(ctx.state()), "shipped", ctx.state())))
 *     .step("shipped", ctx -> Mono.just(Outcome.done(ctx.children().size())))
 *     .build();
 * }</pre>
 */
public final class WorkflowDefinition<S> implements Definition {

    private final String type;
    private final Class<S> stateType;
    private final int version;
    private final String queue;
    private final int maxAttempts;
    private final Backoff backoff;
    private final Duration timeout;
    private final String initialStep;
    private final Map<String, StepHandler<S>> steps;
    /** From-version -> its migration, an unbroken chain up to {@link #version} (empty without migrations). */
    private final java.util.NavigableMap<Integer, StateMigration> migrations;
    /** The same, as a list from the lowest up (read on every claim of a workflow: made once). */
    private final java.util.List<StateMigration> chain;

    private WorkflowDefinition(Builder<S> builder) {
        this.type = builder.type;
        this.stateType = builder.stateType;
        this.version = builder.version;
        this.queue = builder.queue;
        this.maxAttempts = builder.maxAttempts;
        this.backoff = builder.backoff;
        this.timeout = builder.timeout;
        this.initialStep = builder.steps.keySet().iterator().next();
        this.steps = Map.copyOf(builder.steps);
        this.migrations = java.util.Collections.unmodifiableNavigableMap(new java.util.TreeMap<>(builder.migrations));
        this.chain = java.util.List.copyOf(migrations.values());
    }

    public static <S> Builder<S> builder(String type, Class<S> stateType) {
        return new Builder<>(type, stateType);
    }

    @Override
    public String type() {
        return type;
    }

    public Class<S> stateType() {
        return stateType;
    }

    @Override
    public int version() {
        return version;
    }

    @Override
    public String queue() {
        return queue;
    }

    @Override
    public int maxAttempts() {
        return maxAttempts;
    }

    @Override
    public Backoff backoff() {
        return backoff;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    @Override
    public String initialStep() {
        return initialStep;
    }

    /**
     * The oldest version this definition runs: with no migrations, 1 (older instances run as they
     * are, with this definition); with migrations, the lowest version they migrate from.
     */
    @Override
    public int lowestVersion() {
        return migrations.isEmpty() ? 1 : migrations.firstKey();
    }

    /** Its state migrations, from the lowest version up (empty when it has none). */
    public java.util.List<StateMigration> migrations() {
        return chain;
    }

    /** The migrations an instance of {@code fromVersion} goes through to reach {@link #version()}. */
    public java.util.List<StateMigration> migrationsFrom(int fromVersion) {
        return java.util.List.copyOf(migrations.tailMap(fromVersion, true).values());
    }

    /** The handler of {@code step}, or null when this version has no such step. */
    public @Nullable StepHandler<S> step(String step) {
        return steps.get(step);
    }

    /** Whether a step of this version runs inside its outcome's transaction ({@link StepHandler#transactional}). */
    boolean hasTransactionalStep() {
        return steps.values().stream().anyMatch(StepHandler.Transactional.class::isInstance);
    }

    public java.util.Set<String> steps() {
        return steps.keySet();
    }

    @Override
    public String toString() {
        return "WorkflowDefinition{type=" + type + ", version=" + version + ", steps=" + steps.keySet() + "}";
    }

    public static final class Builder<S> {

        private final String type;
        private final Class<S> stateType;
        private int version = 1;
        private String queue = JobDefinition.DEFAULT_QUEUE;
        private int maxAttempts = JobDefinition.DEFAULT_MAX_ATTEMPTS;
        private Backoff backoff = Backoff.DEFAULT;
        private Duration timeout = JobDefinition.DEFAULT_TIMEOUT;
        private final Map<String, StepHandler<S>> steps = new LinkedHashMap<>();
        private final Map<Integer, StateMigration> migrations = new java.util.TreeMap<>();

        private Builder(String type, Class<S> stateType) {
            this.type = Options.requireName("type", type);
            this.stateType = Options.requireNonNull("stateType", stateType);
        }

        public Builder<S> version(int version) {
            this.version = Options.requireAtLeast("version", version, 1);
            return this;
        }

        public Builder<S> queue(String queue) {
            this.queue = QueueNames.require("queue", queue);
            return this;
        }

        /** Attempts per step (at least 1). */
        public Builder<S> maxAttempts(int maxAttempts) {
            this.maxAttempts = Options.requireAtLeast("maxAttempts", maxAttempts, 1);
            return this;
        }

        public Builder<S> backoff(Backoff backoff) {
            this.backoff = Options.requireNonNull("backoff", backoff);
            return this;
        }

        /** The longest one step may run. */
        public Builder<S> timeout(Duration timeout) {
            this.timeout = Options.requirePositive("timeout", timeout);
            return this;
        }

        /**
         * A step; the first one added is where instances start. Names are unique. For steps that
         * block or return a {@code CompletableFuture}, wrap them: {@link StepHandler#blocking},
         * {@link StepHandler#future}; for a step whose database work commits with its outcome,
         * {@link StepHandler#transactional}.
         */
        public Builder<S> step(String name, StepHandler<S> handler) {
            Options.requireName("step name", name);
            Options.requireNonNull("handler", handler);
            String what = "step '" + name + "' of workflow type '" + type + "'";
            StepHandler<S> watched = handler instanceof StepHandler.Transactional<S> transactional
                    ? StepHandler.transactional((context, transaction) -> HandlerWatch.watched(what,
                            () -> transactional.run(context, transaction), true))
                    : context -> HandlerWatch.watched(what, () -> handler.run(context), true);
            if (steps.putIfAbsent(name, watched) != null) {
                throw new IllegalArgumentException("step '" + name + "' is defined twice in workflow " + type);
            }
            return this;
        }

        /**
         * A migration from version {@code n} to {@code n + 1}. The migrations must form an unbroken
         * chain ending at {@link #version}: instances from the lowest from-version up are migrated
         * when claimed; older ones have no path and wait, visible, until failed on purpose.
         */
        public Builder<S> migration(StateMigration migration) {
            Options.requireNonNull("migration", migration);
            if (migrations.putIfAbsent(migration.fromVersion(), migration) != null) {
                throw new IllegalArgumentException("workflow " + type + " has two migrations from version "
                        + migration.fromVersion());
            }
            return this;
        }

        public WorkflowDefinition<S> build() {
            if (steps.isEmpty()) {
                throw new IllegalArgumentException("workflow " + type + " must have at least one step");
            }
            checkMigrations();
            return new WorkflowDefinition<>(this);
        }

        /** The chain is unbroken, ends at this version, and every mapped step lands on a step of it. */
        private void checkMigrations() {
            if (migrations.isEmpty()) {
                return;
            }
            for (StateMigration migration : migrations.values()) {
                if (migration.toVersion() > version) {
                    throw new IllegalArgumentException("workflow " + type + " has a migration from version "
                            + migration.fromVersion() + " to " + migration.toVersion() + ", above its version " + version
                            + " (set .version(n) before or after, but to the newest version)");
                }
            }
            int lowest = migrations.keySet().iterator().next();
            for (int from = lowest; from < version; from++) {
                if (!migrations.containsKey(from)) {
                    throw new IllegalArgumentException("workflow " + type + " has a gap in its migrations: none from"
                            + " version " + from + " to " + (from + 1) + " (registered from versions "
                            + migrations.keySet() + ", version " + version + ")");
                }
            }
            java.util.List<StateMigration> chain = java.util.List.copyOf(migrations.values());
            for (int i = 0; i < chain.size(); i++) {
                for (Map.Entry<String, String> mapped : chain.get(i).steps().entrySet()) {
                    String step = mapped.getValue();
                    for (StateMigration later : chain.subList(i + 1, chain.size())) {
                        step = later.step(step);
                    }
                    if (!steps.containsKey(step)) {
                        throw new IllegalArgumentException("workflow " + type + ": the migration from version "
                                + chain.get(i).fromVersion() + " maps step '" + mapped.getKey() + "' to '"
                                + mapped.getValue() + "'" + (step.equals(mapped.getValue()) ? "" : " (then '" + step + "')")
                                + ", which version " + version + " does not have (its steps: " + steps.keySet() + ")");
                    }
                }
            }
        }
    }
}
