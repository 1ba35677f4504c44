package dev.durable.internal.maintenance;

import dev.durable.EngineClosedException;
import reactor.core.publisher.Mono;
import reactor.pool.InstrumentedPool;
import reactor.pool.PoolBuilder;
import reactor.pool.PoolShutdownException;

/**
 * One batch of maintenance at a time per engine: the engine's pool is sized for one maintenance
 * connection beside the picks and commits, so the services take turns, batch by batch, instead of
 * each holding a connection. A pool of one permit (reactor-pool) is the lane: waiting is
 * non-blocking, and a batch that is cancelled (its timeout) gives the permit back, also while it
 * still waits for it.
 */
public final class Lane {

    private static final Object PERMIT = new Object();

    private final InstrumentedPool<Object> permit = PoolBuilder.from(Mono.just(PERMIT)).sizeBetween(0, 1)
            .buildPool();
    private final String engine;

    /** {@code engine}: the engine's name, for the error of a batch asked for after {@link #close()}. */
    public Lane(String engine) {
        this.engine = engine;
    }

    /** Runs {@code work} when the lane is free; the lane is free again when it ends, fails or is cancelled. */
    public <T> Mono<T> run(Mono<T> work) {
        return permit.withPoolable(held -> work).singleOrEmpty()
                .onErrorMap(PoolShutdownException.class, closed -> new EngineClosedException(engine));
    }

    /** Refuses every batch from now on (EngineClosedException); one waiting for the lane fails. */
    public void close() {
        permit.dispose();
    }
}
