package dev.durable.internal.client;

import dev.durable.CallerTransactions;
import dev.durable.Claim;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.StaleOutcomeException;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.engine.RunTransaction;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.OutcomeSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * Outcomes a caller commits in its own transaction for a run's {@link Claim} ({@code engine.complete},
 * {@code fail} and {@code cancel} with a connection): the run's work was done in that
 * transaction, so the outcome goes with it, or not at all. The same statements as the engine's own
 * commit ({@link OutcomeSql}), under the same guard (the claim's worker, attempt and stamp), the row
 * first locked and checked with the claim's step (an inline step that followed on the claim shares
 * all three): a claim no longer current is refused with {@link StaleOutcomeException} and the
 * caller's transaction should roll back;
 * so is one whose instance's cancel was requested (the settle would end it cancelled, the caller's
 * writes kept).
 * The run's own outcome, when its handler returns, then finds the row no longer its own and is dropped.
 *
 * <p>Each settles its instance; moving a workflow on to another step is the transactional step's to
 * do. A child's parent woken by its settle waits for its queue's poll. Refused: a connection with no
 * transaction open (the outcome would commit on its own), and a transactional run's own (its outcome
 * is what its handler returns).
 */
public final class CallerOutcomes {

    private final OutcomeSql outcomes;
    private final RequestMapper mapper;
    private final CallerTransactions callers;
    private final ConnectionFactory connections;
    private final Mono<Void> whenOpen;

    public CallerOutcomes(OutcomeSql outcomes, RequestMapper mapper, CallerTransactions callers,
            ConnectionFactory connections, Mono<Void> whenOpen) {
        this.outcomes = outcomes;
        this.mapper = mapper;
        this.callers = callers;
        this.connections = connections;
        this.whenOpen = whenOpen;
    }

    /**
     * The connection of the transaction the subscriber has open ({@link CallerTransactions}, as the
     * engine's {@code joinTransactions} finds it); an {@link InvalidRequestException} when it has none:
     * an outcome on a connection of its own would commit apart from the caller's work.
     */
    public Mono<Connection> joined() {
        return Mono.defer(() -> callers.current(connections))
                .map(CallerTransactions.Joined::connection)
                .switchIfEmpty(Mono.error(() -> new InvalidRequestException("no transaction to join: the caller has"
                        + " none open on the engine's connection factory (joinTransactions), or pass its connection")));
    }

    /** The run is done with {@code result} (null for none). */
    public Mono<Void> complete(@Nullable Connection connection, @Nullable Claim claim, @Nullable Object result) {
        return checked(connection, claim).then(Mono.defer(() -> commit(connection, claim, OutcomeRow.done(bare(claim),
                result == null ? null : mapper.encode("result", result), List.of()))));
    }

    /** The run failed for good with {@code error}. */
    public Mono<Void> fail(@Nullable Connection connection, @Nullable Claim claim, @Nullable String error) {
        if (error == null || error.isBlank()) {
            return Mono.error(new InvalidRequestException("error must not be blank"));
        }
        return checked(connection, claim).then(Mono.defer(() -> commit(connection, claim,
                OutcomeRow.failed(bare(claim), error, List.of()))));
    }

    /** The run ends its instance cancelled. */
    public Mono<Void> cancel(@Nullable Connection connection, @Nullable Claim claim) {
        return checked(connection, claim).then(Mono.defer(() -> commit(connection, claim,
                OutcomeRow.cancelled(bare(claim), List.of()))));
    }

    private Mono<Void> checked(@Nullable Connection connection, @Nullable Claim claim) {
        if (connection == null) {
            return Mono.error(new InvalidRequestException("connection must not be null"));
        }
        if (claim == null) {
            return Mono.error(new InvalidRequestException("claim must not be null"));
        }
        if (RunTransaction.is(connection)) {
            return Mono.error(new InvalidRequestException("a transactional handler's outcome is what it returns:"
                    + " completing its run on its own transaction would settle the run under it"));
        }
        // Asked when subscribed: the caller's chain begins its transaction after it assembled this call.
        return Mono.defer(() -> connection.isAutoCommit()
                ? Mono.error(new InvalidRequestException("the connection has no transaction open: the outcome"
                        + " would commit apart from the work it goes with (begin one first)"))
                : whenOpen);
    }

    /**
     * The claim's row locked and checked with its step ({@link OutcomeSql#lockClaim}), then the settle
     * under the commit's guard, which the locked row passes as it was checked. A requested cancel would
     * turn the settle into a cancel, not what the caller's writes went with: refused before it.
     */
    private Mono<Void> commit(Connection connection, Claim claim, OutcomeRow outcome) {
        return outcomes.lockClaim(connection, claim.id(), claim.worker(), claim.attempt(), claim.step(),
                        claim.stamp())
                .switchIfEmpty(Mono.error(() -> new StaleOutcomeException(outcome.id(), outcome.worker())))
                .flatMap(cancelRequested -> cancelRequested && outcome.status() != InstanceStatus.CANCELLED
                        ? Mono.error(StaleOutcomeException.cancelRequested(outcome.id()))
                        : outcomes.settle(connection, List.of(outcome)).then());
    }

    /** The claim as the commit's guard reads it: the row's id, worker, attempt and stamp, nothing else. */
    private static ClaimedRow bare(Claim claim) {
        return new ClaimedRow(claim.id(), claim.worker(), claim.type(), 0, "", 0, 0L, "", null, claim.attempt(),
                claim.stamp(), 0, null, null, List.of(), List.of(), List.of(), null, null, null, null, null, Map.of());
    }
}
