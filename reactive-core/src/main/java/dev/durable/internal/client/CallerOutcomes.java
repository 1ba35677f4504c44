package dev.durable.internal.client;

import dev.durable.Claim;
import dev.durable.Definition;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.StaleOutcomeException;
import dev.durable.WorkflowDefinition;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.engine.Transitions;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.OutcomeRow.LimitChange;
import dev.durable.internal.sql.OutcomeSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Outcomes a caller commits in its own transaction for a run's {@link Claim} ({@code engine.complete},
 * {@code fail}, {@code cancel}, {@code next} with a connection): the run's work was done in that
 * transaction, so the outcome goes with it, or not at all. The same statements as the engine's own
 * commit ({@link OutcomeSql}), under the same guard (the claim's worker and attempt): a claim no longer
 * current is refused with {@link StaleOutcomeException} and the caller's transaction should roll back.
 * The run's own outcome, when its handler returns, then finds the row no longer its own and is dropped.
 *
 * <p>A run moved on to another step is poked when the caller's transaction commits (NOTIFY is
 * transactional); a child's parent woken by its settle waits for its queue's poll.
 */
public final class CallerOutcomes {

    private final OutcomeSql outcomes;
    private final RequestMapper mapper;
    private final Map<String, Definition> definitions;
    private final Transitions transitions;
    private final Mono<Void> whenOpen;

    public CallerOutcomes(OutcomeSql outcomes, RequestMapper mapper, Map<String, Definition> definitions,
            Transitions transitions, Mono<Void> whenOpen) {
        this.outcomes = outcomes;
        this.mapper = mapper;
        this.definitions = definitions;
        this.transitions = transitions;
        this.whenOpen = whenOpen;
    }

    /** The run is done with {@code result} (null for none). */
    public Mono<Void> complete(@Nullable Connection connection, @Nullable Claim claim, @Nullable Object result) {
        return checked(connection, claim).then(Mono.defer(() -> commit(connection, OutcomeRow.done(bare(claim),
                result == null ? null : mapper.encode("result", result), List.of()))));
    }

    /** The run failed for good with {@code error}. */
    public Mono<Void> fail(@Nullable Connection connection, @Nullable Claim claim, @Nullable String error) {
        if (error == null || error.isBlank()) {
            return Mono.error(new InvalidRequestException("error must not be blank"));
        }
        return checked(connection, claim).then(Mono.defer(() -> commit(connection,
                OutcomeRow.failed(bare(claim), error, List.of()))));
    }

    /** The run ends its instance cancelled. */
    public Mono<Void> cancel(@Nullable Connection connection, @Nullable Claim claim) {
        return checked(connection, claim).then(Mono.defer(() -> commit(connection,
                OutcomeRow.cancelled(bare(claim), List.of()))));
    }

    /** The workflow goes on with {@code step} and {@code state} through the queue, as a step's {@code next} does. */
    public Mono<Void> next(@Nullable Connection connection, @Nullable Claim claim, @Nullable String step,
            @Nullable Object state) {
        return checked(connection, claim).then(Mono.defer(() -> {
            if (step == null || step.isBlank()) {
                return Mono.error(new InvalidRequestException("step must not be blank"));
            }
            Definition definition = definitions.get(claim.type());
            if (!(definition instanceof WorkflowDefinition<?> workflow)) {
                return Mono.error(new InvalidRequestException("type '" + claim.type() + "' is not a workflow this"
                        + " engine knows: register it to move its instances to another step"));
            }
            if (workflow.step(step) == null) {
                return Mono.error(new InvalidRequestException("workflow " + claim.type() + " has no step '" + step
                        + "'"));
            }
            String stateJson = state == null ? null : mapper.encode("state", state);
            return commit(connection, OutcomeRow.next(bare(claim), step, stateJson, 0, LimitChange.NONE, List.of()));
        }));
    }

    private Mono<Void> checked(@Nullable Connection connection, @Nullable Claim claim) {
        if (connection == null) {
            return Mono.error(new InvalidRequestException("connection must not be null"));
        }
        if (claim == null) {
            return Mono.error(new InvalidRequestException("claim must not be null"));
        }
        return whenOpen;
    }

    private Mono<Void> commit(Connection connection, OutcomeRow outcome) {
        Flux<Transition> committed = OutcomeSql.settlesPlainly(outcome) ? outcomes.settle(connection, List.of(outcome))
                : outcomes.commit(connection, List.of(outcome));
        return committed.next()
                .switchIfEmpty(Mono.error(() -> new StaleOutcomeException(outcome.id(), outcome.worker())))
                .flatMap(transition -> transition.status() == InstanceStatus.RUNNABLE
                        ? transitions.pokeOnCommit(connection, transition.queue()) : Mono.empty());
    }

    /** The claim as the commit's guard reads it: the row's id, worker and attempt, nothing else. */
    private static ClaimedRow bare(Claim claim) {
        return new ClaimedRow(claim.id(), claim.worker(), claim.type(), 0, "", 0, 0L, "", null, claim.attempt(), 0,
                null, null, List.of(), List.of(), List.of(), null, null, null, null, null, Map.of());
    }
}
