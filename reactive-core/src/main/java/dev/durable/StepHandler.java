package dev.durable;

import dev.durable.internal.handler.BlockingScheduler;
import io.r2dbc.spi.Connection;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import reactor.core.publisher.Mono;

/**
 * One step of a workflow: its context in, a {@code Mono} of the {@link Outcome} out. An error is
 * retried with the workflow's backoff until the step's attempts run out; a
 * {@link PermanentFailureException} fails the instance at once.
 *
 * <p>Steps of other shapes become one with the same guarantees: {@link #future} and
 * {@link #blocking}; {@code durable-kotlin} adds {@code suspend} functions.
 */
@FunctionalInterface
public interface StepHandler<S> {

    Mono<Outcome<S>> run(StepContext<S> context);

    /** A step returning a {@code CompletableFuture} or other {@code CompletionStage} of its outcome. */
    static <S> StepHandler<S> future(Function<StepContext<S>, ? extends CompletionStage<Outcome<S>>> handler) {
        Options.requireNonNull("handler", handler);
        return context -> Mono.fromCompletionStage(() -> handler.apply(context));
    }

    /**
     * A step that blocks: it runs on Durable's blocking scheduler (virtual threads on JDK 21 and
     * later, else bounded-elastic threads), never on the engine's handler scheduler. A cancelled run
     * interrupts its thread.
     */
    static <S> StepHandler<S> blocking(Blocking<S> handler) {
        Options.requireNonNull("handler", handler);
        return context -> BlockingScheduler.call(() -> handler.run(context));
    }

    /**
     * A step whose database work commits with its outcome: {@code step} runs inside the transaction
     * that commits the outcome it returns, on the engine's connection ({@code transaction}), so its
     * statements and the outcome (guarded by the run's claim) commit together or not at all. An
     * error, a timeout, a cancel or a lost claim rolls its statements back. See
     * {@link JobDefinition#transactional} for the rules; a transactional step's inline {@code next}
     * goes through the queue.
     */
    static <S> StepHandler<S> transactional(InTransaction<S> step) {
        Options.requireNonNull("step", step);
        return new Transactional<>(step);
    }

    /** A step's work inside the transaction that commits its outcome ({@link #transactional}). */
    @FunctionalInterface
    interface InTransaction<S> {

        Mono<Outcome<S>> run(StepContext<S> context, Connection transaction);
    }

    /**
     * A step the engine runs inside its outcome's transaction ({@link #transactional}). It has no
     * run without a transaction: {@link #run(StepContext)} fails, naming the step's rule.
     */
    final class Transactional<S> implements StepHandler<S> {

        private final InTransaction<S> step;

        private Transactional(InTransaction<S> step) {
            this.step = step;
        }

        /** The step's work on {@code transaction}. */
        public Mono<Outcome<S>> run(StepContext<S> context, Connection transaction) {
            return step.run(context, transaction);
        }

        @Override
        public Mono<Outcome<S>> run(StepContext<S> context) {
            return Mono.error(new InvalidRequestException("step '" + context.step() + "' of workflow "
                    + context.type() + " is transactional: it runs only inside the transaction of its outcome,"
                    + " with that transaction's connection"));
        }
    }

    /** A step as blocking code. */
    @FunctionalInterface
    interface Blocking<S> {

        Outcome<S> run(StepContext<S> context) throws Exception;
    }
}
