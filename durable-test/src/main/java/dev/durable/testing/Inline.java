package dev.durable.testing;

import dev.durable.Definition;
import dev.durable.InvalidRequestException;
import dev.durable.JobContext;
import dev.durable.JobDefinition;
import dev.durable.JobHandler;
import dev.durable.JsonCodec;
import dev.durable.Outcome;
import dev.durable.PermanentFailureException;
import dev.durable.StepContext;
import dev.durable.StepHandler;
import dev.durable.UnknownTypeException;
import dev.durable.WorkflowDefinition;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import reactor.core.Exceptions;
import reactor.core.publisher.Mono;

/** Runs handlers inline and decides as the engine's executor does (retry or fail on an error). */
final class Inline {

    private Inline() {
    }

    /**
     * A job's handler run once; a transactional one on {@code transaction} (required for it, refused for
     * any other: the test's own connection, its transaction the test's to commit or roll back).
     */
    static <A, R> Performed<R> job(JobDefinition<A, R> job, @Nullable A args, int attempt, JsonCodec codec,
            @Nullable Connection transaction) {
        JobHandler.InTransaction<A, R> inTransaction = job.transactionalHandler();
        requireTransactionFor(inTransaction != null, "job type '" + job.type() + "'", transaction);
        A decoded = args == null ? null : codec.decode(codec.encode(args), job.argsType());
        JobContext context = new JobContext(0, job.type(), job.queue(), attempt, job.maxAttempts());
        R result;
        try {
            result = block(Mono.defer(() -> inTransaction != null ? inTransaction.handle(decoded, context, transaction)
                    : job.handler().handle(decoded, context)), job.timeout());
        } catch (Throwable error) {
            return afterError(job, attempt, error);
        }
        return new Performed<>(Performed.Kind.DONE, result, result == null ? null : codec.encode(result), null, null,
                null, null);
    }

    static <S> Performed<Object> step(WorkflowDefinition<S> workflow, StepHandler<S> handler, StepContext<S> context,
            int attempt, JsonCodec codec, @Nullable Connection transaction) {
        boolean transactional = handler instanceof StepHandler.Transactional<S>;
        requireTransactionFor(transactional, "step '" + context.step() + "' of workflow " + workflow.type(), transaction);
        Outcome<S> outcome;
        try {
            outcome = block(Mono.defer(() -> transactional
                    ? ((StepHandler.Transactional<S>) handler).run(context, transaction)
                    : handler.run(context)), workflow.timeout());
            if (outcome == null) {
                throw new IllegalStateException("step '" + context.step() + "' completed without an outcome");
            }
        } catch (Throwable error) {
            return afterError(workflow, attempt, error);
        }
        return switch (outcome.kind()) {
            case NEXT -> of(Performed.Kind.NEXT, outcome, null);
            case AWAIT -> of(Performed.Kind.AWAIT, outcome, null);
            case SPAWN -> of(Performed.Kind.SPAWN, outcome, null);
            case RETRY -> new Performed<>(Performed.Kind.RETRY, null, null, outcome, null, outcome.delay(), null);
            case FAIL -> new Performed<>(Performed.Kind.FAILED, null, null, outcome, outcome.error(), null, null);
            case CANCEL -> of(Performed.Kind.CANCELLED, outcome, null);
            case DONE -> new Performed<>(Performed.Kind.DONE, outcome.result(),
                    outcome.result() == null ? null : codec.encode(outcome.result()), outcome, null, null, null);
        };
    }

    /** A transactional handler runs on the test's connection, and only it does. */
    private static void requireTransactionFor(boolean transactional, String what, @Nullable Connection transaction) {
        if (transactional && transaction == null) {
            throw new IllegalArgumentException(what + " is transactional: perform it with a connection of yours"
                    + " that has a transaction open (its statements go there; commit or roll back as the test needs)");
        }
        if (!transactional && transaction != null) {
            throw new IllegalArgumentException(what + " is not transactional: it runs without a connection");
        }
    }

    private static Performed<Object> of(Performed.Kind kind, Outcome<?> outcome, @Nullable String error) {
        return new Performed<>(kind, null, null, outcome, error, null, null);
    }

    private static <T> @Nullable T block(Mono<T> run, Duration timeout) {
        try {
            return run.timeout(timeout).block();
        } catch (RuntimeException error) {
            throw Exceptions.unwrap(error) instanceof Exception cause ? new Wrapped(cause) : error;
        }
    }

    private static <R> Performed<R> afterError(Definition definition, int attempt, Throwable thrown) {
        Throwable error = thrown instanceof Wrapped wrapped ? wrapped.getCause() : thrown;
        String message = error instanceof TimeoutException ? "timed out after " + definition.timeout()
                : error.getClass().getName() + (error.getMessage() == null ? "" : ": " + error.getMessage());
        boolean permanent = error instanceof PermanentFailureException || error instanceof InvalidRequestException
                || error instanceof UnknownTypeException;
        if (permanent || attempt >= definition.maxAttempts()) {
            return new Performed<>(Performed.Kind.FAILED, null, null, null, message, null, error);
        }
        return new Performed<>(Performed.Kind.RETRY, null, null, null, message, definition.backoff().delay(attempt),
                error);
    }

    /** Carries a handler's checked or unchecked error out of block(). */
    private static final class Wrapped extends RuntimeException {
        Wrapped(Throwable cause) {
            super(cause);
        }
    }
}
