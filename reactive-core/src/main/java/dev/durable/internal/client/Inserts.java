package dev.durable.internal.client;

import dev.durable.CallerTransactions;
import dev.durable.ConflictPolicy;
import dev.durable.DuplicateCorrelationKeyException;
import dev.durable.InsertMode;
import dev.durable.InsertResult;
import dev.durable.InvalidRequestException;
import dev.durable.JobRequest;
import dev.durable.internal.Errors;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.client.InsertStatements.Answer;
import dev.durable.internal.client.InsertStatements.Form;
import dev.durable.internal.engine.ClaimOnInsert;
import dev.durable.internal.engine.Telemetry;
import dev.durable.internal.engine.Transitions;
import dev.durable.internal.sql.InsertSql;
import dev.durable.internal.sql.InsertSql.Inserted;
import dev.durable.internal.sql.PolicyInsertSql;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.observation.TracePropagation;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * Every insert of the client API, as one pipeline:
 * <ol>
 * <li>the requests are checked into rows, with the subscriber's trace context when tracing is on;
 * <li>the statement is planned by mode ({@link Form}: plain, skipping live keys, or under the
 *     requests' conflict policies) and by place: the engine's own connection (where idle local
 *     schedulers may claim rows as they go in, and a lost deadlock goes again), the caller's
 *     transaction joined from the subscriber's context, or a connection the caller hands in;
 * <li>one epilogue, whatever ran: INSERTED for each new row before its claim is handed to its
 *     scheduler, the queues of rows due now that nobody claimed poked (at once, or once the
 *     caller's transaction commits), and a warning about queues no live engine serves.
 * </ol>
 * On the engine's own connection the whole insert holds an event-order ticket
 * ({@code Telemetry.insertStarting}), so a pick of its rows is never reported before they are.
 * {@link #insertAsync} shares round trips through the {@link InsertBatcher}.
 */
public final class Inserts {

    private static final Logger log = Loggers.getLogger(Inserts.class);
    /** How often an insert goes again (a deadlock, an unnamed holder) before it gives up. */
    private static final int INSERT_ATTEMPTS = 3;

    /** Where an insert's statement runs, which says how its queues are poked. */
    private sealed interface Place {
    }

    /** On the engine's own pooled connection, in a transaction of its own. */
    private record Own() implements Place {
    }

    /** Inside the caller's transaction found in the subscriber's context: poked after it commits. */
    private record Joined(CallerTransactions.Joined transaction) implements Place {
    }

    /** On a connection the caller handed in, inside whatever transaction it has open. */
    private record OnConnection(Connection connection) implements Place {
    }

    private static final Place OWN = new Own();

    private final RequestMapper mapper;
    private final TracePropagation tracing;
    private final InsertStatements statements;
    private final Telemetry telemetry;
    private final Transitions transitions;
    private final LocalQueues local;
    private final CallerTransactions callers;
    private final ConnectionFactory connections;
    private final long leaseMillis;
    private final Mono<Void> whenOpen;
    private final InsertBatcher batcher;

    /**
     * {@code whenOpen} is empty while the engine is open and an error once it is closing; the batcher
     * flushes by {@code batchSize} or {@code batchDelay} and holds at most {@code bufferCapacity}.
     */
    public Inserts(RequestMapper mapper, TracePropagation tracing, InsertSql inserts, PolicyInsertSql policies,
            Telemetry telemetry,
            Transitions transitions, LocalQueues local, CallerTransactions callers, ConnectionFactory connections,
            Duration leaseTtl, Mono<Void> whenOpen, InsertBatcher.Settings batching) {
        this.mapper = mapper;
        this.tracing = tracing;
        this.statements = new InsertStatements(inserts, policies);
        this.telemetry = telemetry;
        this.transitions = transitions;
        this.local = local;
        this.callers = callers;
        this.connections = connections;
        this.leaseMillis = leaseTtl.toMillis();
        this.whenOpen = whenOpen;
        this.batcher = new InsertBatcher(batching, rows -> own(rows, Form.PLAIN, true, 1).map(Inserts::ids));
    }

    // ---- Entry points ------------------------------------------------------------------------

    /** Inserts one request; its id (or the id that carries it, under a conflict policy). */
    public Mono<Long> insert(@Nullable JobRequest request) {
        if (request == null) {
            return Mono.error(new InvalidRequestException("request must not be null"));
        }
        return insertAll(List.of(request)).map(ids -> ids.get(0));
    }

    /** Inserts the requests all or nothing (or each under its conflict policy); their ids in order. */
    public Mono<List<Long>> insertAll(List<JobRequest> requests) {
        return insertAll(requests, InsertMode.REJECT_DUPLICATES).map(Inserts::ids);
    }

    /** Inserts the requests under {@code mode}; what became of each, in order. */
    public Mono<List<InsertResult>> insertAll(List<JobRequest> requests, @Nullable InsertMode mode) {
        if (mode == null) {
            return Mono.error(new InvalidRequestException("mode must not be null"));
        }
        return whenOpen.then(rows(requests)).flatMap(rows -> {
            if (mode == InsertMode.REJECT_DUPLICATES) {
                Form form = rows.stream().anyMatch(NewInstance::hasPolicy) ? Form.POLICIES : Form.PLAIN;
                return place().flatMap(place -> send(rows, form, place));
            }
            if (rows.stream().anyMatch(NewInstance::changesHolder)) {
                // The mode makes each request without a policy of its own skip a live key.
                List<NewInstance> skipping = rows.stream()
                        .map(row -> row.hasPolicy() ? row : row.withOnConflict(ConflictPolicy.skip())).toList();
                return place().flatMap(place -> send(skipping, Form.POLICIES, place));
            }
            // It may send its statement again (a deadlock, a holder it could not name): not inside a
            // caller's transaction, which one failed statement aborts. Saying so beats not joining.
            return place().flatMap(place -> place instanceof Own ? send(rows, Form.SKIP_DUPLICATES, place)
                    : Mono.error(new InvalidRequestException("insertAll with SKIP_DUPLICATES does not join a"
                            + " caller's transaction: inside one, use insertAll(requests) (a live key fails it)")));
        });
    }

    /** Inserts on the caller's connection, inside the transaction it has open; the ids in order. */
    public Mono<List<Long>> insertAll(@Nullable Connection connection, List<JobRequest> requests) {
        if (connection == null) {
            return Mono.error(new InvalidRequestException("connection must not be null"));
        }
        return whenOpen.then(rows(requests))
                .flatMap(rows -> send(rows, rows.stream().anyMatch(NewInstance::hasPolicy) ? Form.POLICIES : Form.PLAIN,
                        new OnConnection(connection)))
                .map(Inserts::ids);
    }

    /**
     * Inserts one request with others into one round trip ({@link InsertBatcher}); inside a caller's
     * transaction, or under a conflict policy, it goes in a statement of its own.
     */
    public Mono<Long> insertAsync(@Nullable JobRequest request) {
        if (request == null) {
            return Mono.error(new InvalidRequestException("request must not be null"));
        }
        return whenOpen.then(rows(Collections.singletonList(request)).map(rows -> rows.get(0)))
                .flatMap(row -> place().flatMap(place -> row.hasPolicy() || !(place instanceof Own)
                        ? send(List.of(row), row.hasPolicy() ? Form.POLICIES : Form.PLAIN, place)
                                .map(results -> results.get(0).id())
                        : batcher.insert(row)));
    }

    /** Flushes what the batcher holds; the engine's close waits for it before its pool goes. */
    public Mono<Void> drain() {
        return batcher.drain();
    }

    // ---- Plan --------------------------------------------------------------------------------

    /**
     * The checked rows of the requests, carrying the trace context of the subscriber (its
     * observation, or the span in scope) when tracing is configured; without, nothing is read.
     */
    private Mono<List<NewInstance>> rows(List<JobRequest> requests) {
        if (tracing == TracePropagation.NONE) {
            return Mono.fromCallable(() -> mapper.toRows(requests, null));
        }
        return Mono.deferContextual(context -> {
            String trace = tracing.capture(context);
            return Mono.fromCallable(() -> mapper.toRows(requests, null, trace));
        });
    }

    /** The caller's transaction to join, from the subscriber's context; else the engine's own connection. */
    private Mono<Place> place() {
        return callers == CallerTransactions.NONE ? Mono.just(OWN)
                : Mono.defer(() -> callers.current(connections)).<Place>map(Joined::new).defaultIfEmpty(OWN);
    }

    private Mono<List<InsertResult>> send(List<NewInstance> rows, Form form, Place place) {
        if (form == Form.POLICIES) {
            try {
                RequestMapper.checkRepeatedKeys(rows);
            } catch (InvalidRequestException invalid) {
                return Mono.error(invalid);
            }
        }
        if (place instanceof Own) {
            return own(rows, form, true, 1);
        }
        Connection connection = place instanceof Joined joined ? joined.transaction().connection()
                : ((OnConnection) place).connection();
        return statements.send(form, connection, ClaimOnInsert.none(rows).insertions(), 0)
                .flatMap(answers -> epilogue(rows, answers, ClaimOnInsert.none(rows), place));
    }

    /**
     * On the engine's own connection: rows claimed by idle local schedulers where they can take them,
     * under an event-order ticket, again after a lost deadlock; a skipping insert asks again for the
     * requests whose holder it could not name, unclaimed, a bounded number of times.
     */
    private Mono<List<InsertResult>> own(List<NewInstance> rows, Form form, boolean claim, int attempt) {
        ClaimOnInsert.Plan plan = claim ? local.claims(rows) : ClaimOnInsert.none(rows);
        Mono<List<InsertResult>> insert = telemetry.ordered(statements.send(form, null, plan.insertions(), leaseMillis)
                // Keyed rows elect their key's head under a lock per key (the schema's "Key election"):
                // a batch over keys A and B can deadlock with a commit settling B's and A's heads. The
                // loser was rolled back whole, so it goes again.
                .retryWhen(afterDeadlock())
                .doOnError(error -> plan.cancel())
                .flatMap(answers -> epilogue(rows, answers, plan, OWN)));
        Mono<List<InsertResult>> answered = form != Form.SKIP_DUPLICATES ? insert
                : insert.flatMap(results -> askAgainForUnnamed(rows, results, attempt));
        if (!plan.claimsAny()) {
            return answered;
        }
        // Rows inserted claimed must reach their scheduler whatever the caller does: a caller that
        // cancels (a timeout, a client gone) must not strand the reservation or the rows.
        Mono<List<InsertResult>> detached = answered.cache();
        detached.subscribe(null, error -> log.debug("insert with claims failed: {}", error.toString()));
        return detached;
    }

    /**
     * A request whose key holder committed after the skipping statement's snapshot comes back
     * unnamed; those go again in a new statement, which sees the holder (or finds the key free).
     */
    private Mono<List<InsertResult>> askAgainForUnnamed(List<NewInstance> rows, List<@Nullable InsertResult> results,
            int attempt) {
        List<Integer> unnamed = new ArrayList<>();
        for (int i = 0; i < results.size(); i++) {
            if (results.get(i) == null) {
                unnamed.add(i);
            }
        }
        if (unnamed.isEmpty()) {
            return Mono.just(results);
        }
        List<NewInstance> again = unnamed.stream().map(rows::get).toList();
        if (attempt >= INSERT_ATTEMPTS) {
            return Mono.error(new DuplicateCorrelationKeyException(again.get(0).correlationKey(),
                    new IllegalStateException("the live holder of the key changed under each of "
                            + INSERT_ATTEMPTS + " attempts to name it")));
        }
        return own(again, Form.SKIP_DUPLICATES, false, attempt + 1).map(later -> {
            List<@Nullable InsertResult> all = new ArrayList<>(results);
            for (int j = 0; j < unnamed.size(); j++) {
                all.set(unnamed.get(j), later.get(j));
            }
            return List.copyOf(all);
        });
    }

    // ---- Epilogue ----------------------------------------------------------------------------

    /**
     * What every insert does once its statement answered: INSERTED for the new rows (before the
     * hand-over: a claimed row's PICKED must not come first), claimed rows handed to their
     * schedulers, the queues of rows due now that nobody claimed (and of holders a replace made
     * due) poked as the place allows, then the warning about queues no live engine serves. Answers
     * in request order; a request left unnamed answers null.
     */
    private Mono<List<InsertResult>> epilogue(List<NewInstance> rows, List<Answer> answers, ClaimOnInsert.Plan plan,
            Place place) {
        List<NewInstance> insertedRows = new ArrayList<>();
        List<Inserted> inserted = new ArrayList<>();
        Set<String> toPoke = new LinkedHashSet<>();
        Set<String> placedQueues = new LinkedHashSet<>();
        List<@Nullable InsertResult> results = new ArrayList<>(answers.size());
        for (int i = 0; i < answers.size(); i++) {
            Answer answer = answers.get(i);
            NewInstance row = rows.get(i);
            results.add(answer.result());
            if (answer.inserted() != null) {
                insertedRows.add(row);
                inserted.add(answer.inserted());
                if (answer.inserted().due() && answer.inserted().claim() == null) {
                    toPoke.add(row.queue());
                }
            } else if (answer.holderDue()) {
                toPoke.add(row.queue());
            }
            if (answer.result() != null && answer.result().disposition() != InsertResult.Disposition.SKIPPED) {
                placedQueues.add(row.queue());
            }
        }
        transitions.inserted(insertedRows, inserted.stream().map(Inserted::id).toList());
        plan.handOver(inserted);
        Mono<Void> poked = Mono.empty();
        if (!toPoke.isEmpty()) {
            if (place instanceof Own) {
                toPoke.forEach(transitions::poke);
            } else if (place instanceof Joined joined) {
                joined.transaction().afterCommit(() -> toPoke.forEach(transitions::poke));
            } else {
                Connection connection = ((OnConnection) place).connection();
                poked = Flux.fromIterable(toPoke).concatMap(queue -> transitions.pokeOnCommit(connection, queue)).then();
            }
        }
        Mono<Void> warned = placedQueues.isEmpty() ? Mono.empty() : local.warnIfUnserved(List.copyOf(placedQueues));
        return poked.then(warned).then(Mono.fromSupplier(() -> Collections.unmodifiableList(results)));
    }

    /**
     * An insert of the engine's own transaction that lost a deadlock goes again, after a short random
     * pause so the two do not meet again in step; the last failure is the caller's typed error.
     */
    private static Retry afterDeadlock() {
        return Retry.backoff(INSERT_ATTEMPTS, Duration.ofMillis(5)).jitter(0.75).filter(Errors::isDeadlock)
                .onRetryExhaustedThrow((spec, signal) -> signal.failure());
    }

    private static List<Long> ids(List<InsertResult> results) {
        return results.stream().map(InsertResult::id).toList();
    }
}
