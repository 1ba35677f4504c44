package dev.durable.testing;

import dev.durable.Child;
import dev.durable.InstanceStatus;
import dev.durable.JacksonJsonCodec;
import dev.durable.JsonCodec;
import dev.durable.Signal;
import dev.durable.StepContext;
import dev.durable.StepHandler;
import dev.durable.WorkflowDefinition;
import io.r2dbc.spi.Connection;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One workflow step to run inline ({@link DurableTesting#step}): its state, the signals it was woken
 * by, its children on a join, its attempt. State, payloads and results go through the codec as they
 * would in the engine.
 *
 * <pre>{@code
 * Performed<Object> run = DurableTesting.step(approval, "decide").state("invoice 7")
 *         .signal("approved", new Approval("ada")).perform();
 * assertThat(run.kind()).isEqualTo(Performed.Kind.DONE);
 * }</pre>
 */
public final class StepRun<S> {

    private final WorkflowDefinition<S> workflow;
    private final String step;
    private @Nullable S state;
    private final List<Signal> signals = new ArrayList<>();
    private final List<Child> children = new ArrayList<>();
    private boolean awaited;
    private int attempt = 1;
    private JsonCodec codec = new JacksonJsonCodec();
    private @Nullable Connection transaction;

    StepRun(WorkflowDefinition<S> workflow, String step) {
        if (workflow.step(step) == null) {
            throw new IllegalArgumentException("workflow " + workflow.type() + " has no step '" + step + "' (it has "
                    + workflow.steps() + ")");
        }
        this.workflow = workflow;
        this.step = step;
    }

    public StepRun<S> state(@Nullable S state) {
        this.state = state;
        return this;
    }

    /** The step was woken by this signal (the previous step awaited it). */
    public StepRun<S> signal(String name, @Nullable Object payload) {
        awaited = true;
        signals.add(new Signal(signals.size() + 1, name, payload == null ? null : codec.encode(payload), Instant.now()));
        return this;
    }

    /** The previous step awaited signals and none came before its timeout. */
    public StepRun<S> awaitTimedOut() {
        awaited = true;
        signals.clear();
        return this;
    }

    /** A child as the join step sees it. */
    public StepRun<S> child(String type, InstanceStatus status, @Nullable Object result, @Nullable String lastError) {
        children.add(new Child(children.size() + 1, type, status, result == null ? null : codec.encode(result),
                lastError));
        return this;
    }

    /** The attempt this run is (1 for the first); decides between retry and fail on an error. */
    public StepRun<S> attempt(int attempt) {
        if (attempt < 1) {
            throw new IllegalArgumentException("attempt must be at least 1, was " + attempt);
        }
        this.attempt = attempt;
        return this;
    }

    /**
     * For a {@linkplain StepHandler#transactional transactional} step: a connection of the test's with a
     * transaction open, where the step's statements go (the test commits or rolls back).
     */
    public StepRun<S> transaction(Connection transaction) {
        if (transaction == null) {
            throw new IllegalArgumentException("transaction must not be null");
        }
        this.transaction = transaction;
        return this;
    }

    /** The codec of your engine, when it is not the default. */
    public StepRun<S> codec(JsonCodec codec) {
        this.codec = codec;
        return this;
    }

    /** Runs the step on the calling thread and says what the engine would do. */
    public Performed<Object> perform() {
        StepHandler<S> handler = workflow.step(step);
        // Through the codec and back, as the engine stores and reads the state.
        S decoded = state == null ? null : codec.decode(codec.encode(state), workflow.stateType());
        StepContext<S> context = new StepContext<>(0, workflow.type(), workflow.queue(), step, attempt,
                workflow.maxAttempts(), decoded, awaited, signals, signals, children, codec);
        return Inline.step(workflow, handler, context, attempt, codec, transaction);
    }
}
