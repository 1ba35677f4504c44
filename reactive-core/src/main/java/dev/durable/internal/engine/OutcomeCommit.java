package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.internal.Db;
import dev.durable.internal.sql.InsertSql;
import dev.durable.internal.sql.InsertSql.Insertion;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.OutcomeSql;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The commit of one batch of outcomes, its rows in id order (so commits and heartbeats lock rows
 * in one order and never deadlock each other). Plain outcomes (no riders) are auto-committed: the
 * ones that only settle their row on the fast path, the others in the general statement. A batch
 * with riders is one transaction of a fixed set of statements, whatever its size: lock the rows,
 * mark the consumed signals, commit every outcome, insert the children of parents that parked for
 * them, and read which parents their settled children woke.
 */
final class OutcomeCommit {

    /** What a batch did: the committed rows, the parents it woke and the children it spawned. */
    record Committed(List<Transition> transitions, List<Transition> wokenParents, List<Transition> spawned) {
    }

    private final Db db;
    private final OutcomeSql outcomes;
    private final InsertSql inserts;

    OutcomeCommit(Db db, OutcomeSql outcomes, InsertSql inserts) {
        this.db = db;
        this.outcomes = outcomes;
        this.inserts = inserts;
    }

    Mono<Committed> commit(List<OutcomeRow> unordered) {
        List<OutcomeRow> batch = unordered.stream().sorted(Comparator.comparingLong(OutcomeRow::id)).toList();
        if (batch.stream().noneMatch(OutcomeRow::hasRiders)) {
            return db.withConnection(connection -> plain(connection, batch)).single();
        }
        return db.inTransaction(connection -> withRiders(connection, batch)).single();
    }

    /**
     * Commits one outcome inside the transaction open on {@code connection} (a transactional run's,
     * whose handler wrote in it): the same statements as a batch of one, committed by the caller.
     */
    Mono<Committed> commitIn(Connection connection, OutcomeRow outcome) {
        List<OutcomeRow> one = List.of(outcome);
        return outcome.hasRiders() ? withRiders(connection, one) : plain(connection, one);
    }

    private Mono<Committed> plain(Connection connection, List<OutcomeRow> batch) {
        List<OutcomeRow> settling = batch.stream().filter(OutcomeSql::settlesPlainly).toList();
        List<OutcomeRow> others = batch.stream().filter(outcome -> !OutcomeSql.settlesPlainly(outcome)).toList();
        return Flux.concat(
                        settling.isEmpty() ? Flux.empty() : outcomes.settle(connection, settling),
                        others.isEmpty() ? Flux.empty() : outcomes.commit(connection, others))
                .collectList()
                .map(transitions -> new Committed(transitions, List.of(), List.of()));
    }

    private Mono<Committed> withRiders(Connection connection, List<OutcomeRow> batch) {
        List<Long> signalIds = new ArrayList<>();
        List<String> signalWorkers = new ArrayList<>();
        List<Integer> signalAttempts = new ArrayList<>();
        List<Long> signalClaims = new ArrayList<>();
        for (OutcomeRow outcome : batch) {
            for (Long signal : outcome.consumedSignals()) {
                signalIds.add(signal);
                signalWorkers.add(outcome.worker());
                signalAttempts.add(outcome.claimedAttempt());
                signalClaims.add(outcome.claimXid());
            }
        }
        Mono<Void> consume = signalIds.isEmpty() ? Mono.empty()
                : outcomes.consumeSignals(connection, signalIds, signalWorkers, signalAttempts, signalClaims);
        return outcomes.lockForCommit(connection, batch.stream().map(OutcomeRow::id).toList())
                .then(consume)
                .thenMany(outcomes.commit(connection, batch))
                .collectList()
                .flatMap(transitions -> {
                    Map<Long, InstanceStatus> committed = new HashMap<>();
                    for (Transition transition : transitions) {
                        committed.put(transition.id(), transition.status());
                    }
                    List<NewInstance> children = new ArrayList<>();
                    Set<Long> parents = new LinkedHashSet<>();
                    for (OutcomeRow outcome : batch) {
                        InstanceStatus status = committed.get(outcome.id());
                        if (status == null) {
                            continue; // stale
                        }
                        // A parent whose cancel was requested ended cancelled: its children are not born.
                        if (status == InstanceStatus.AWAITING_CHILDREN) {
                            children.addAll(outcome.children());
                        }
                        // A settled child counts off its parent (the trigger did it): the parent may wake.
                        if (outcome.parentId() != null && status.isTerminal()) {
                            parents.add(outcome.parentId());
                        }
                    }
                    List<Transition> spawned = new ArrayList<>();
                    Mono<Void> spawn = children.isEmpty() ? Mono.empty()
                            : inserts.insert(connection, children.stream().map(child -> new Insertion(child, null))
                                            .toList(), 0)
                                    .index()
                                    .doOnNext(child -> spawned.add(new Transition(child.getT2().id(),
                                            children.get(child.getT1().intValue()).queue(), InstanceStatus.RUNNABLE)))
                                    .then();
                    Mono<List<Transition>> woken = parents.isEmpty() ? Mono.just(List.of())
                            : outcomes.wokenParents(connection, parents).collectList();
                    return spawn.then(woken).map(parentsWoken -> new Committed(transitions, parentsWoken, spawned));
                });
    }
}
