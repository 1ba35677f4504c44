package dev.durable.internal.engine;

import dev.durable.Cancellation;
import dev.durable.internal.sql.Rows.ClaimedRow;
import java.util.function.BooleanSupplier;
import reactor.core.publisher.Mono;

/** Runs one claimed row of a {@link QueueScheduler} to its committed outcome, stopping when asked to; never errors. */
@FunctionalInterface
interface Runner {

    /**
     * {@code claimLost}: once the run is stopped, whether it was for a lost claim (not a cancel).
     * {@code committing}: called at most once, when all the run has left to do is commit its outcome
     * (no handler runs after it on this claim), so its run slot can go to the next row.
     */
    Mono<Executor.RunResult> run(ClaimedRow row, Cancellation cancellation, BooleanSupplier claimLost,
            Runnable committing);
}
