package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.JobContext;
import dev.durable.JobDefinition;
import dev.durable.JsonCodec;
import dev.durable.PermanentFailureException;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.OutcomeRow;
import dev.durable.internal.sql.Rows.Transition;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Runs one claimed row: finds its definition, decodes its arguments, invokes the handler on the
 * handler scheduler under the type's timeout, turns what happened into an outcome and commits it
 * through the group committer. Never errors: whatever the handler does becomes an outcome.
 */
public final class Executor {

    private static final Logger log = Loggers.getLogger(Executor.class);
    private static final int MAX_ERROR_LENGTH = 4000;

    private final Map<String, JobDefinition<?, ?>> definitions;
    private final JsonCodec codec;
    private final OutcomeCommitter committer;
    private final Scheduler handlerScheduler;
    private final int maxPayloadBytes;
    private final long leaseMillis;
    private final Consumer<Transition> onCommitted;

    public Executor(Map<String, JobDefinition<?, ?>> definitions, JsonCodec codec, OutcomeCommitter committer,
            Scheduler handlerScheduler, int maxPayloadBytes, Duration leaseTtl, Consumer<Transition> onCommitted) {
        this.definitions = definitions;
        this.codec = codec;
        this.committer = committer;
        this.handlerScheduler = handlerScheduler;
        this.maxPayloadBytes = maxPayloadBytes;
        this.leaseMillis = leaseTtl.toMillis();
        this.onCommitted = onCommitted;
    }

    /** How a run ended, from the scheduler's point of view. */
    public enum RunResult {
        /** The outcome is committed. */
        COMMITTED,
        /** The outcome was dropped: the worker no longer owned the row. */
        STALE,
        /** The commit failed; the row's lease expires and the reaper returns it. */
        NOT_COMMITTED
    }

    /** Runs the row and commits its outcome; emits how that went, never an error. */
    public Mono<RunResult> run(ClaimedRow row, String worker) {
        JobDefinition<?, ?> definition = definitions.get(row.type());
        Mono<OutcomeRow> outcome = definition == null
                ? Mono.just(failed(row, worker, "unknown type '" + row.type()
                        + "': no definition is registered for it on the engine that picked it"))
                : runJob(definition, row, worker);
        return outcome
                .flatMap(committer::commit)
                .map(committed -> report(row, worker, committed))
                .onErrorResume(error -> {
                    log.warn("outcome of instance {} not committed ({}); its lease will expire and"
                            + " the reaper returns it", row.id(), error.toString());
                    return Mono.just(RunResult.NOT_COMMITTED);
                });
    }

    private <A, R> Mono<OutcomeRow> runJob(JobDefinition<A, R> definition, ClaimedRow row, String worker) {
        A args;
        try {
            args = row.stateJson() == null ? null : codec.decode(row.stateJson(), definition.argsType());
        } catch (RuntimeException malformed) {
            return Mono.just(failed(row, worker, "malformed arguments for " + definition.argsType().getName()
                    + ": " + malformed.getMessage()));
        }
        JobContext context = new JobContext(row.id(), row.type(), row.queue(), row.attempt(), row.maxAttempts());
        A decoded = args;
        return Mono.defer(() -> definition.handler().handle(decoded, context))
                .subscribeOn(handlerScheduler)
                .timeout(definition.timeout())
                .map(result -> done(row, worker, result))
                .defaultIfEmpty(done(row, worker, null))
                .onErrorResume(error -> Mono.just(afterError(definition, row, worker, error)));
    }

    private OutcomeRow done(ClaimedRow row, String worker, @Nullable Object result) {
        if (result == null) {
            return outcome(row, worker, InstanceStatus.DONE, null, null, null);
        }
        String json;
        try {
            json = codec.encode(result);
        } catch (RuntimeException unencodable) {
            return failed(row, worker, "result cannot be encoded: " + unencodable.getMessage());
        }
        int bytes = json.getBytes(StandardCharsets.UTF_8).length;
        if (bytes > maxPayloadBytes) {
            return failed(row, worker, "result is " + bytes + " bytes of JSON, above the limit of "
                    + maxPayloadBytes + " (EngineOptions.maxPayloadBytes)");
        }
        return outcome(row, worker, InstanceStatus.DONE, json, null, null);
    }

    private OutcomeRow afterError(JobDefinition<?, ?> definition, ClaimedRow row, String worker, Throwable error) {
        String message = describe(error, definition.timeout());
        if (error instanceof PermanentFailureException || row.attempt() >= row.maxAttempts()) {
            return failed(row, worker, message);
        }
        long delay = definition.backoff().delay(row.attempt()).toMillis();
        return outcome(row, worker, InstanceStatus.RUNNABLE, null, message, delay);
    }

    private OutcomeRow failed(ClaimedRow row, String worker, String error) {
        return outcome(row, worker, InstanceStatus.FAILED, null, error, null);
    }

    private OutcomeRow outcome(ClaimedRow row, String worker, InstanceStatus status, @Nullable String result,
            @Nullable String error, @Nullable Long delayMillis) {
        return new OutcomeRow(row.id(), worker, status, null, null, result, truncate(error), delayMillis,
                false, leaseMillis);
    }

    private RunResult report(ClaimedRow row, String worker, Optional<Transition> committed) {
        if (committed.isEmpty()) {
            log.info("stale outcome of instance {} dropped: worker {} lost its lease", row.id(), worker);
            return RunResult.STALE;
        }
        onCommitted.accept(committed.get());
        return RunResult.COMMITTED;
    }

    private static String describe(Throwable error, Duration timeout) {
        if (error instanceof TimeoutException) {
            return "timed out after " + timeout;
        }
        String message = error.getMessage();
        return error.getClass().getName() + (message == null ? "" : ": " + message);
    }

    private static @Nullable String truncate(@Nullable String error) {
        return error == null || error.length() <= MAX_ERROR_LENGTH ? error : error.substring(0, MAX_ERROR_LENGTH);
    }
}
