package dev.durable.testing;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JacksonJsonCodec;
import dev.durable.JobDefinition;
import dev.durable.JsonCodec;
import dev.durable.WorkflowDefinition;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;

/**
 * Helpers for tests of your own jobs and workflows, blocking by design (call them from tests, never
 * from a reactive thread): drain, perform, recorded events and assertions.
 *
 * <pre>{@code
 * long id = engine.insert(JobRequest.of("send-email", email)).block();
 * DurableTesting.drain(engine);                       // everything due has run
 * DurableTesting.assertInstance(engine, id).isDone().hasResult("sent to ada@example.com");
 *
 * DrainSummary ran = DurableTesting.drain(engine, DrainOptions.defaults().withScheduled().withRecursion());
 * Performed<String> once = DurableTesting.perform(sendEmail, email);   // inline, no database
 * }</pre>
 */
public final class DurableTesting {

    /** How long {@link #drain(DurableEngine)} waits before it fails the test. */
    public static final Duration DEFAULT_DRAIN_TIMEOUT = Duration.ofSeconds(30);

    private DurableTesting() {
    }

    /**
     * How far ahead {@link #drain} looks for work about to be due: retries after a short backoff are
     * waited for, rows scheduled further out are not.
     */
    public static final Duration DRAIN_HORIZON = Duration.ofSeconds(2);

    /**
     * Runs everything due on the engine's queues, and what that makes due (retries within
     * {@link #DRAIN_HORIZON} included), until they are idle.
     */
    public static void drain(DurableEngine engine) {
        drain(engine, DEFAULT_DRAIN_TIMEOUT);
    }

    public static void drain(DurableEngine engine, Duration timeout) {
        engine.awaitIdle(timeout, DRAIN_HORIZON).block(timeout.plusSeconds(5));
    }

    /**
     * Runs what is due on the engine's queues until it has settled, parked or is scheduled later;
     * with {@link DrainOptions#withScheduled()} moving the engine's {@link TestClock} through what
     * is scheduled, with {@link DrainOptions#withRecursion()} following what the runs create. Returns
     * what ran; fails the test (an {@link AssertionError}) after the options' timeout.
     *
     * <pre>{@code
     * DrainSummary ran = DurableTesting.drain(engine, DrainOptions.defaults().withScheduled().withRecursion());
     * assertThat(ran.retried()).isEqualTo(3);
     * }</pre>
     */
    public static DrainSummary drain(DurableEngine engine, DrainOptions options) {
        TestClock clock = null;
        if (options.scheduled()) {
            clock = TestClock.of(engine).orElseThrow(() -> new IllegalStateException("withScheduled moves the "
                    + "engine's test clock: build the engine on TestClock.on(db).engineOptions()"));
        }
        Drain drain = new Drain(engine, options, clock);
        return drain.run();
    }

    /**
     * Runs a job's handler once on the calling thread with {@code args} (through the default codec
     * and back, as the engine stores them), as attempt 1: no engine, no queue, no database. The
     * result says what the engine would commit: done with a result, a retry after the type's
     * backoff, or failed.
     */
    public static <A, R> Performed<R> perform(JobDefinition<A, R> job, @Nullable A args) {
        return perform(job, args, 1, new JacksonJsonCodec());
    }

    /** As {@link #perform(JobDefinition, Object)}, as the given attempt and through your codec. */
    public static <A, R> Performed<R> perform(JobDefinition<A, R> job, @Nullable A args, int attempt, JsonCodec codec) {
        if (attempt < 1) {
            throw new IllegalArgumentException("attempt must be at least 1, was " + attempt);
        }
        return Inline.job(job, args, attempt, codec, null);
    }

    /**
     * A {@linkplain JobDefinition#transactional transactional} job's handler run once, inline, on
     * {@code transaction}: a connection of the test's with a transaction open, where the handler's
     * statements go (the test commits or rolls back, and reads what the handler wrote). As attempt 1;
     * the result says what the engine would commit with those statements.
     */
    public static <A, R> Performed<R> perform(JobDefinition<A, R> job, @Nullable A args, Connection transaction) {
        if (transaction == null) {
            throw new IllegalArgumentException("transaction must not be null");
        }
        return Inline.job(job, args, 1, new JacksonJsonCodec(), transaction);
    }

    /** Runs one workflow step once with {@code state}, inline (see {@link #step} for signals and children). */
    public static <S> Performed<Object> perform(WorkflowDefinition<S> workflow, String step, @Nullable S state) {
        return step(workflow, step).state(state).perform();
    }

    /** One workflow step to run inline, with the state, signals and children you give it. */
    public static <S> StepRun<S> step(WorkflowDefinition<S> workflow, String step) {
        return new StepRun<>(workflow, step);
    }

    /** Records the engine's events from now on, for assertions on paths and events. */
    public static RecordedEvents record(DurableEngine engine) {
        return new RecordedEvents(engine);
    }

    /** Fails unless an instance of {@code type} was inserted; returns those there are. */
    public static List<Instance> assertInserted(DurableEngine engine, String type) {
        List<Instance> found = instancesOf(engine, type);
        if (found.isEmpty()) {
            throw new AssertionError("no instance of " + type + " was inserted; there are " + typesPresent(engine));
        }
        return found;
    }

    /**
     * Fails unless an instance of {@code type} whose arguments (a workflow's state), decoded as
     * {@code argsType} by the engine's codec, match; returns the instances that match.
     */
    public static <A> List<Instance> assertInserted(DurableEngine engine, String type, Class<A> argsType,
            Predicate<? super A> args) {
        List<Instance> ofType = instancesOf(engine, type);
        List<Instance> matching = ofType.stream().filter(instance -> args.test(instance.state(argsType))).toList();
        if (matching.isEmpty()) {
            throw new AssertionError("no instance of " + type + " with matching arguments was inserted; those of "
                    + type + " have " + ofType.stream().map(Instance::stateJson).toList());
        }
        return matching;
    }

    /** Fails if an instance of {@code type} was inserted. */
    public static void refuteInserted(DurableEngine engine, String type) {
        List<Instance> found = instancesOf(engine, type);
        if (!found.isEmpty()) {
            throw new AssertionError(found.size() + " instance(s) of " + type + " were inserted, expected none: "
                    + found.stream().map(Instance::stateJson).toList());
        }
    }

    /** Fails if an instance of {@code type} whose arguments match was inserted. */
    public static <A> void refuteInserted(DurableEngine engine, String type, Class<A> argsType,
            Predicate<? super A> args) {
        List<Instance> matching = instancesOf(engine, type).stream()
                .filter(instance -> args.test(instance.state(argsType))).toList();
        if (!matching.isEmpty()) {
            throw new AssertionError("an instance of " + type + " with matching arguments was inserted: "
                    + matching.stream().map(Instance::stateJson).toList());
        }
    }

    /** The children of an instance, in id order. */
    public static List<Instance> children(DurableEngine engine, long parentId) {
        return all(engine).stream().filter(instance -> Objects.equals(instance.parentId(), parentId)).toList();
    }

    private static List<Instance> instancesOf(DurableEngine engine, String type) {
        return all(engine).stream().filter(instance -> instance.type().equals(type)).toList();
    }

    private static List<String> typesPresent(DurableEngine engine) {
        return all(engine).stream().map(Instance::type).distinct().sorted().toList();
    }

    /** Every instance the engine can list, in id order (a test's database holds few). */
    private static List<Instance> all(DurableEngine engine) {
        List<Instance> all = new ArrayList<>();
        long after = 0;
        while (true) {
            List<Instance> page = engine.list(null, null, after, 500).collectList().block(Duration.ofSeconds(30));
            if (page == null || page.isEmpty()) {
                return all;
            }
            all.addAll(page);
            after = page.get(page.size() - 1).id();
        }
    }

    /** Checks on the instance as the database holds it now. */
    public static InstanceAssert assertInstance(DurableEngine engine, long id) {
        Instance instance = engine.get(id).block(Duration.ofSeconds(30));
        if (instance == null) {
            throw new AssertionError("no instance " + id);
        }
        return new InstanceAssert(engine, instance);
    }

    /** Fluent checks of one instance; each failure says what the instance looked like. */
    public static final class InstanceAssert {

        private final DurableEngine engine;
        private final Instance instance;

        InstanceAssert(DurableEngine engine, Instance instance) {
            this.engine = engine;
            this.instance = instance;
        }

        public Instance instance() {
            return instance;
        }

        public InstanceAssert hasStatus(InstanceStatus status) {
            if (instance.status() != status) {
                throw new AssertionError("instance " + instance.id() + " (" + instance.type() + ") is "
                        + instance.status() + ", expected " + status + describe());
            }
            return this;
        }

        public InstanceAssert isDone() {
            return hasStatus(InstanceStatus.DONE);
        }

        public InstanceAssert isFailed() {
            return hasStatus(InstanceStatus.FAILED);
        }

        public InstanceAssert isCancelled() {
            return hasStatus(InstanceStatus.CANCELLED);
        }

        public InstanceAssert isAwaitingSignal() {
            return hasStatus(InstanceStatus.AWAITING_SIGNAL);
        }

        public InstanceAssert isAtStep(String step) {
            if (!instance.step().equals(step)) {
                throw new AssertionError("instance " + instance.id() + " is at step '" + instance.step()
                        + "', expected '" + step + "'" + describe());
            }
            return this;
        }

        /** The result, compared as the engine's codec encodes it. */
        public InstanceAssert hasResult(@Nullable Object expected) {
            String expectedJson = expected == null ? null : engine.codec().encode(expected);
            String actual = instance.resultJson() == null ? null
                    : engine.codec().encode(engine.codec().decode(instance.resultJson(), Object.class));
            String wanted = expectedJson == null ? null
                    : engine.codec().encode(engine.codec().decode(expectedJson, Object.class));
            if (!Objects.equals(actual, wanted)) {
                throw new AssertionError("instance " + instance.id() + " has result " + instance.resultJson()
                        + ", expected " + expectedJson + describe());
            }
            return this;
        }

        /** The state (a workflow's, or a job's arguments) decoded as {@code type}. */
        public <T> @Nullable T state(Class<T> type) {
            return instance.stateJson() == null ? null : engine.codec().decode(instance.stateJson(), type);
        }

        /** The state (a workflow's, or a job's arguments), compared as the engine's codec encodes it. */
        public InstanceAssert hasState(@Nullable Object expected) {
            String wanted = expected == null ? null : engine.codec().encode(expected);
            String actual = instance.stateJson();
            if (!Objects.equals(normalized(actual), normalized(wanted))) {
                throw new AssertionError("instance " + instance.id() + " has state " + actual + ", expected " + wanted
                        + describe());
            }
            return this;
        }

        /** Its steps consumed exactly these signals, in the order they were delivered. */
        public InstanceAssert hasConsumedSignals(String... names) {
            List<String> consumed;
            try (EngineDatabase database = new EngineDatabase(engine)) {
                consumed = database.consumedSignals(instance.id());
            }
            if (!consumed.equals(Arrays.asList(names))) {
                throw new AssertionError("instance " + instance.id() + " consumed signals " + consumed + ", expected "
                        + Arrays.asList(names) + describe());
            }
            return this;
        }

        /** It has this many children. */
        public InstanceAssert hasChildren(int count) {
            List<Instance> children = children(engine, instance.id());
            if (children.size() != count) {
                throw new AssertionError("instance " + instance.id() + " has " + children.size() + " children, expected "
                        + count + ": " + children.stream().map(child -> child.type() + " " + child.status()).toList()
                        + describe());
            }
            return this;
        }

        /** Every child is in {@code status}; it has at least one. */
        public InstanceAssert hasAllChildren(InstanceStatus status) {
            List<Instance> children = children(engine, instance.id());
            if (children.isEmpty() || children.stream().anyMatch(child -> child.status() != status)) {
                throw new AssertionError("instance " + instance.id() + " has children "
                        + children.stream().map(child -> child.id() + " " + child.type() + " " + child.status()).toList()
                        + ", expected all " + status + describe());
            }
            return this;
        }

        private @Nullable String normalized(@Nullable String json) {
            return json == null ? null : engine.codec().encode(engine.codec().decode(json, Object.class));
        }

        public InstanceAssert hasLastErrorContaining(String text) {
            if (instance.lastError() == null || !instance.lastError().contains(text)) {
                throw new AssertionError("instance " + instance.id() + " has last error " + instance.lastError()
                        + ", expected one containing '" + text + "'" + describe());
            }
            return this;
        }

        private String describe() {
            return " (attempt " + instance.attempt() + " of " + instance.maxAttempts() + ", step " + instance.step()
                    + (instance.lastError() != null ? ", last error: " + instance.lastError() : "") + ")";
        }
    }
}
