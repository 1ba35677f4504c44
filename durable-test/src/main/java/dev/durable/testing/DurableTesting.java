package dev.durable.testing;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Helpers for tests of your own jobs and workflows, blocking by design (call them from tests, never
 * from a reactive thread).
 *
 * <pre>{@code
 * long id = engine.insert(JobRequest.of("send-email", email)).block();
 * DurableTesting.drain(engine);                       // everything due has run
 * DurableTesting.assertInstance(engine, id).isDone().hasResult("sent to ada@example.com");
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
