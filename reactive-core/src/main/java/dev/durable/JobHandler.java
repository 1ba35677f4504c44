package dev.durable;

import dev.durable.internal.handler.BlockingScheduler;
import io.r2dbc.spi.Connection;
import java.util.concurrent.CompletionStage;
import java.util.function.BiFunction;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The work of a job type: arguments in, a {@code Mono} of the result out. An error is retried
 * with the type's backoff until its attempts run out; a {@link PermanentFailureException} fails
 * the instance at once. An empty {@code Mono} completes the job with no result.
 *
 * <p>Handlers of other shapes become one with the same guarantees (timeout, cancellation, retries):
 * {@link #publisher} (any Reactive Streams publisher), {@link #future} (a {@code CompletableFuture}
 * or other {@code CompletionStage}) and {@link #blocking} (plain blocking code, run on virtual threads
 * when the JDK has them, bounded-elastic threads on 17). {@code durable-kotlin} adds {@code suspend}
 * functions. {@link JobDefinition} has a factory for each shape.
 */
@FunctionalInterface
public interface JobHandler<A, R> {

    Mono<R> handle(A args, JobContext context);

    /**
     * A handler returning any publisher (a {@code Flux}, an RxJava or Mutiny type, ...): it runs to
     * completion and its last element, if any, is the result. Cancelling the run cancels it.
     */
    static <A, R> JobHandler<A, R> publisher(BiFunction<A, JobContext, ? extends Publisher<R>> handler) {
        Options.requireNonNull("handler", handler);
        return (args, context) -> Flux.from(handler.apply(args, context)).takeLast(1).singleOrEmpty();
    }

    /**
     * A handler returning a {@code CompletableFuture} or other {@code CompletionStage}; a null result
     * completes the job with no result. Cancelling the run cancels the future.
     */
    static <A, R> JobHandler<A, R> future(BiFunction<A, JobContext, ? extends CompletionStage<R>> handler) {
        Options.requireNonNull("handler", handler);
        return (args, context) -> Mono.fromCompletionStage(() -> handler.apply(args, context));
    }

    /**
     * A handler that blocks (JDBC, a blocking HTTP client, {@code Thread.sleep}): it runs on Durable's
     * blocking scheduler (a virtual thread per run on JDK 21 and later, else bounded-elastic
     * threads), never on the engine's handler scheduler, so it cannot stall non-blocking work. A
     * cancelled run interrupts its thread; check {@link JobContext#cancellation()} between pieces.
     */
    static <A, R> JobHandler<A, R> blocking(Blocking<A, R> handler) {
        Options.requireNonNull("handler", handler);
        return (args, context) -> BlockingScheduler.call(() -> handler.handle(args, context));
    }

    /** A job's work as blocking code; a null result completes the job with no result. */
    @FunctionalInterface
    interface Blocking<A, R> {

        R handle(A args, JobContext context) throws Exception;
    }

    /**
     * A job's work inside the transaction that commits its outcome ({@link JobDefinition#transactional}):
     * its statements on {@code transaction} and the job's outcome commit together or not at all.
     */
    @FunctionalInterface
    interface InTransaction<A, R> {

        Mono<R> handle(A args, JobContext context, Connection transaction);
    }

    /** A job's work as blocking code that needs only its arguments. */
    @FunctionalInterface
    interface BlockingFunction<A, R> {

        R apply(A args) throws Exception;
    }
}
