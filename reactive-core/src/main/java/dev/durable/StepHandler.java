package dev.durable;

import dev.durable.internal.handler.BlockingScheduler;
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

    /** A step as blocking code. */
    @FunctionalInterface
    interface Blocking<S> {

        Outcome<S> run(StepContext<S> context) throws Exception;
    }
}
