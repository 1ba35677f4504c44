package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.StepTransactionException;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.OutcomeSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.function.Function;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The runs of transactional handlers ({@code JobDefinition.transactional},
 * {@code StepHandler.transactional}): each in a transaction of its own on one of the engine's
 * connections, where the handler's statements and the outcome it decided commit together.
 *
 * <p>In order, once a slot is free ({@link RunSlots}: such runs hold a connection throughout, so only
 * so many at once), in four round trips besides the handler's: BEGIN with the server's bounds (on an
 * idle transaction, and on each of the handler's statements: its type's timeout), the handler (on the
 * handler scheduler, bounded by its type's timeout by the caller), the engine's statement bound and
 * generic plans from here on, then the outcome's statements as a batch of one
 * ({@link OutcomeCommit#commitIn}), guarded by the claim, and COMMIT. Whatever stops it before the
 * COMMIT rolls back the handler's statements with the outcome: the handler's error (the caller
 * commits the retry or failure on its own), a cancel or a lost claim (the run's stop), the guard's
 * refusal (the claim was lost meanwhile: stale), a cancel requested since the run began (the commit
 * would end the instance cancelled, its writes kept: the chaos harness's tx_effects found it), the
 * database's refusal of the outcome. The commit is
 * the run's own, never part of a group commit: a slow handler holds back nobody else's outcome.
 *
 * <p>An inline {@code next} goes through the queue: its rate and window draws and its key's check
 * belong before its transition commits, which here is the handler's transaction.
 */
final class TransactionalRuns {

    /** How a transactional run ended, when its transaction did not fail on its own. */
    sealed interface Ended permits Committed, Stale, Cancelled, HandlerFailed, Refused {
    }

    /** The handler's statements and {@code outcome} committed together. */
    record Committed(OutcomeRow outcome, OutcomeCommit.Committed committed) implements Ended {
    }

    /** The claim's guard refused the outcome (the run no longer owned the row): both rolled back. */
    record Stale(OutcomeRow outcome) implements Ended {
    }

    /**
     * The instance's cancel was requested while the handler ran, so the commit turned its outcome into
     * a cancel: the handler's writes belong to the outcome it decided, not to a cancelled instance, so
     * both rolled back; the cancel is the caller's to commit.
     */
    record Cancelled(OutcomeRow outcome) implements Ended {
    }

    /** The handler failed (or timed out): its statements rolled back; its retry or failure is the caller's. */
    record HandlerFailed(Throwable error) implements Ended {
    }

    /** The database refused the outcome itself: rolled back with the handler's statements. */
    record Refused(OutcomeRow outcome, Throwable error) implements Ended {
    }

    /** Carries an ending out of the transaction, which rolls back on it. */
    private static final class RolledBack extends RuntimeException {

        private static final long serialVersionUID = 1L;

        final transient Ended ended;

        RolledBack(Ended ended) {
            super(null, null, false, false);
            this.ended = ended;
        }
    }

    private final Db db;
    private final Duration callTimeout;
    private final OutcomeSql outcomeSql;
    private final OutcomeCommit outcomes;
    private final RunSlots slots;
    private final Scheduler handlers;

    TransactionalRuns(Db db, Duration callTimeout, OutcomeSql outcomeSql, OutcomeCommit outcomes, int concurrency,
            Scheduler handlers) {
        this.db = db;
        this.callTimeout = callTimeout;
        this.outcomeSql = outcomeSql;
        this.outcomes = outcomes;
        this.slots = new RunSlots(concurrency);
        this.handlers = handlers;
    }

    /**
     * Runs {@code handler} in a transaction and commits the outcome it decides in it. Errors only when
     * the transaction itself failed (the connection, the COMMIT): then whether it committed is not
     * known, and the row is left to its lease.
     */
    Mono<Ended> run(ClaimedRow row, Duration timeout, Function<Connection, Mono<OutcomeRow>> handler) {
        String run = "instance " + row.id() + " (" + row.type() + " step '" + row.step() + "', attempt "
                + row.attempt() + ")";
        // Every call bounded: the handler by its type's timeout (the caller's), the statements around it by
        // the call timeout; the transaction as a whole by both.
        Duration bound = timeout.plus(callTimeout);
        return slots.run(() -> db.withTimeout(bound).withConnection(connection -> Db.inTransaction(connection,
                outcomeSql.beginBounded(connection, bound, timeout), begun -> {
                    RunTransaction transaction = new RunTransaction(connection, run);
                    // BEGIN answers on a database event loop, where user code must never run.
                    return Mono.just(transaction).publishOn(handlers)
                            .flatMap(t -> Mono.defer(() -> handler.apply(t))
                                    .doOnTerminate(transaction::end)
                                    .doOnCancel(transaction::end)
                                    .onErrorMap(error -> new RolledBack(new HandlerFailed(error))))
                            .flatMap(outcome -> commitWithTheWrites(connection,
                                    outcome.status() == InstanceStatus.EXECUTING ? outcome.throughQueue() : outcome));
                })).single())
                .onErrorResume(RolledBack.class, rolledBack -> Mono.just(rolledBack.ended));
    }

    /**
     * The outcome's statements in the run's transaction, after the handler's writes; any ending but
     * {@link Committed} is a {@link RolledBack} that rolls both back.
     */
    private Mono<Ended> commitWithTheWrites(Connection connection, OutcomeRow outcome) {
        return outcomeSql.beforeOutcome(connection, callTimeout)
                .then(outcomes.commitIn(connection, outcome))
                .onErrorMap(Errors::isRefusedOutcome, refused -> new RolledBack(new Refused(outcome, refused)))
                // The handler went on past a statement that failed: its writes are not what it meant, and
                // the transaction takes no more statements.
                .onErrorMap(Errors::isAbortedTransaction, aborted -> new RolledBack(new HandlerFailed(
                        new StepTransactionException("a statement of the handler failed and the handler carried"
                                + " on: the transaction was aborted with it (undo a statement that may fail with a"
                                + " savepoint, or let its error end the run)"))))
                .flatMap(committed -> {
                    if (committed.transitions().isEmpty()) {
                        return Mono.error(new RolledBack(new Stale(outcome)));
                    }
                    boolean cancelledInstead = committed.transitions().get(0).status() == InstanceStatus.CANCELLED
                            && outcome.status() != InstanceStatus.CANCELLED;
                    return cancelledInstead ? Mono.error(new RolledBack(new Cancelled(outcome)))
                            : Mono.just(new Committed(outcome, committed));
                });
    }
}
