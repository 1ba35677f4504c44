package dev.durable.internal.admin;

import dev.durable.CancelResult;
import dev.durable.EngineOptions;
import dev.durable.Instance;
import dev.durable.JobRequest;
import dev.durable.SignalResult;
import dev.durable.limit.Limiter;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * What the admin asks of its engine: the client's calls it reuses (each with the checks and the
 * transitions the engine's own call makes) and the engine's options. Nothing else of the engine.
 */
public interface EngineCalls {

    EngineOptions options();

    /** Tells the local schedulers of {@code queue} that work is there (after an action made some due). */
    void poke(String queue);

    Mono<Instance> get(long id);

    /** Cancels the instance and its live descendants. */
    Mono<CancelResult> cancelWithDescendants(long id);

    Mono<SignalResult> signal(long id, String name, @Nullable Object payload);

    Mono<Instance> replay(long id, String step, @Nullable Object state);

    Mono<Long> fork(long id, String step, @Nullable Object state);

    Mono<Long> insert(JobRequest request);

    /** The running engine's limiter, null while it is not running: the permits it keeps to itself. */
    @Nullable Limiter runningLimiter();
}
