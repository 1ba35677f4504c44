package dev.durable.internal;

import dev.durable.Definition;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidArgumentsException;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.JsonCodec;
import dev.durable.NoTargetException;
import dev.durable.ReplayRefusedException;
import dev.durable.ReplayRefusedException.Reason;
import dev.durable.WorkflowDefinition;
import dev.durable.admin.StepInput;
import dev.durable.internal.sql.ReplaySql;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.LongFunction;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * Replay from a step and fork ({@code DurableEngine.replay}, {@code fork}): the checks the engine can make
 * from its definitions (does the type have that step? does a given state decode?), the one statement that
 * acts (guarded in the database, so two racing calls cannot both act), and, when it acted on nothing, the
 * reads that say why as a typed error.
 */
public final class Replays {

    private final ReplaySql sql;
    private final LongFunction<Mono<Instance>> get;
    private final Map<String, Definition> definitions;
    private final JsonCodec codec;
    /** A given state to JSON with the insert's checks (encodable, storable, within the payload limit). */
    private final BiFunction<String, Object, String> encode;
    private final Consumer<String> poke;
    /** Empty while the engine is open, an EngineClosedException once it is closing (deferred: read per call). */
    private final Mono<Void> whenOpen;

    public Replays(ReplaySql sql, LongFunction<Mono<Instance>> get, Map<String, Definition> definitions,
            JsonCodec codec, BiFunction<String, Object, String> encode, Consumer<String> poke, Mono<Void> whenOpen) {
        this.sql = sql;
        this.whenOpen = whenOpen;
        this.get = get;
        this.definitions = definitions;
        this.codec = codec;
        this.encode = encode;
        this.poke = poke;
    }

    /** Brings the settled instance {@code id} back at {@code step}; emits it as it is then. */
    public Mono<Instance> replay(long id, String step, @Nullable Object state) {
        Objects.requireNonNull(step, "step");
        return whenOpen.then(get.apply(id))
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to replay")))
                .flatMap(instance -> {
                    if (!instance.status().isTerminal()) {
                        return Mono.error(new ReplayRefusedException(id, step, Reason.INSTANCE_LIVE,
                                "it is " + instance.status().sqlName() + ": only a settled instance is replayed"
                                        + " (fork a live one)"));
                    }
                    return prepare(instance, step, state).flatMap(start -> sql.replay(id, step, start.json(),
                                    start.version(), definitions.get(instance.type()) == null,
                                    note("replayed", step, state),
                                    JobRequest.DEFAULT_OCCUPIED.stream().map(InstanceStatus::sqlName)
                                            .collect(Collectors.toSet()))
                            .flatMap(started -> {
                                poke.accept(started.queue());
                                return get.apply(id);
                            })
                            .switchIfEmpty(Mono.defer(() -> refused(id, step, state != null, true))));
                });
    }

    /** Starts a new instance from {@code id}'s {@code step}; emits the new id. */
    public Mono<Long> fork(long id, String step, @Nullable Object state) {
        Objects.requireNonNull(step, "step");
        return whenOpen.then(get.apply(id))
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to fork")))
                .flatMap(instance -> prepare(instance, step, state).flatMap(start -> sql.fork(id, step, start.json(),
                                start.version(), definitions.get(instance.type()) == null,
                                note("forked from #" + id, step, state))
                        .map(started -> {
                            poke.accept(started.queue());
                            return started.id();
                        })
                        .switchIfEmpty(Mono.defer(() -> refused(id, step, state != null, false)))));
    }

    /** What the attempt row says: from where, and whether with the recorded state or a given one. */
    private static String note(String what, String step, @Nullable Object state) {
        return what + " at step '" + step + "' with " + (state == null ? "its recorded state" : "a given state");
    }

    /** A given state's JSON and the version it is of, or nulls for the recorded state. */
    private record Start(@Nullable String json, @Nullable Integer version) {
    }

    /**
     * Checks the step against the type's definition when this engine knows it, and encodes a given state
     * (decoding it as the type's state or args, so a state the steps cannot read is refused here; it is of
     * the definition's version). Without a given state the step's recorded input is used: one recorded
     * under an older version may name a step this version renamed (the claim's migration maps it), and
     * one below the definition's lowest version could never run here.
     */
    private Mono<Start> prepare(Instance instance, String step, @Nullable Object state) {
        Definition definition = definitions.get(instance.type());
        if (definition == null) {
            return state == null ? Mono.just(new Start(null, null))
                    : Mono.fromCallable(() -> new Start(encode.apply(what(instance, step), state), null));
        }
        Set<String> steps;
        Class<?> stateType;
        if (definition instanceof WorkflowDefinition<?> workflow) {
            steps = workflow.steps();
            stateType = workflow.stateType();
        } else if (definition instanceof JobDefinition<?, ?> job) {
            steps = Set.of(JobDefinition.STEP);
            stateType = job.argsType();
        } else {
            steps = Set.of(definition.initialStep());
            stateType = null;
        }
        if (state == null) {
            return inputs(instance).map(inputs -> inputs.stream().filter(input -> input.step().equals(step))
                            .findFirst())
                    .flatMap(input -> {
                        if (input.isPresent() && input.get().typeVersion() < definition.lowestVersion()) {
                            return Mono.error(new ReplayRefusedException(instance.id(), step,
                                    Reason.NO_MIGRATION_PATH, "its input was recorded under version "
                                            + input.get().typeVersion() + ", and this engine migrates '"
                                            + instance.type() + "' only from version " + definition.lowestVersion()));
                        }
                        boolean renamedSince = input.isPresent() && input.get().typeVersion() < definition.version();
                        if (!steps.contains(step) && !renamedSince) {
                            return Mono.error(unknownStep(instance, step, steps));
                        }
                        return Mono.just(new Start(null, null));
                    });
        }
        if (!steps.contains(step)) {
            return Mono.error(unknownStep(instance, step, steps));
        }
        return Mono.fromCallable(() -> {
            String json = encode.apply(what(instance, step), state);
            if (stateType != null) {
                try {
                    codec.decode(json, stateType);
                } catch (RuntimeException unreadable) {
                    throw new InvalidArgumentsException(instance.type(), stateType, null,
                            "the given state does not decode: " + unreadable.getMessage());
                }
            }
            return new Start(json, definition.version());
        });
    }

    private static String what(Instance instance, String step) {
        return "the state of instance " + instance.id() + " at step '" + step + "'";
    }

    private static ReplayRefusedException unknownStep(Instance instance, String step, Set<String> steps) {
        return new ReplayRefusedException(instance.id(), step, Reason.UNKNOWN_STEP, "type '" + instance.type()
                + "' has no such step (it has " + String.join(", ", new java.util.TreeSet<>(steps)) + ")");
    }

    /** The statement acted on nothing: reads why (the instance may have changed meanwhile; this says what is now). */
    private <T> Mono<T> refused(long id, String step, boolean stateGiven, boolean replay) {
        String asked = replay ? "to replay" : "to fork";
        return get.apply(id)
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, asked)))
                .flatMap(instance -> {
                    if (replay && !instance.status().isTerminal()) {
                        return Mono.error(new ReplayRefusedException(id, step, Reason.INSTANCE_LIVE,
                                "it is " + instance.status().sqlName() + " (another replay may have won)"));
                    }
                    Mono<Boolean> parentWaits = replay && instance.parentId() != null
                            ? get.apply(instance.parentId()).map(parent -> !parent.status().isTerminal())
                                    .defaultIfEmpty(false)
                            : Mono.just(false);
                    return parentWaits.flatMap(waits -> {
                        if (waits) {
                            return Mono.error(new ReplayRefusedException(id, step, Reason.PARENT_WAITS,
                                    "its parent #" + instance.parentId() + " still waits for its children"));
                        }
                        return (replay ? sql.childrenLive(id) : Mono.just(false)).flatMap(childrenLive -> childrenLive
                                ? Mono.error(new ReplayRefusedException(id, step, Reason.CHILDREN_LIVE,
                                        "some of its children still run: wait for them or cancel them"))
                                : sql.recorded(id, step)).flatMap(recorded -> {
                            if (!recorded && !step.equals(instance.step())) {
                                boolean known = definitions.containsKey(instance.type());
                                return Mono.error(stateGiven && !known
                                        ? new ReplayRefusedException(id, step, Reason.UNKNOWN_STEP, "this engine"
                                                + " does not know type '" + instance.type() + "', and the instance"
                                                + " never ran that step")
                                        : new ReplayRefusedException(id, step, Reason.NO_RECORDED_INPUT,
                                                "it never ran that step (or its input was not kept): give a state"));
                            }
                            return Mono.error(new ReplayRefusedException(id, step, Reason.KEY_OCCUPIED,
                                    "a live instance holds its correlation key '" + instance.correlationKey()
                                            + "'"));
                        });
                    });
                });
    }

    /**
     * The inputs of {@code instance}'s steps: the recorded ones, oldest first, then the one its own row
     * holds (which replaces a recorded one of the same step: it is newer).
     */
    public Mono<List<StepInput>> inputs(Instance instance) {
        return sql.inputs(instance.id()).collectList().map(recorded -> {
            List<StepInput> all = new ArrayList<>();
            for (StepInput input : recorded) {
                if (!input.step().equals(instance.step())) {
                    all.add(input);
                }
            }
            all.add(new StepInput(instance.step(), instance.typeVersion(), instance.stateJson(), null,
                    instance.updatedAt(), true));
            return all;
        });
    }

    public Mono<ReplaySql.Lineage> lineage(long id, int limit) {
        return sql.lineage(id, limit);
    }
}
