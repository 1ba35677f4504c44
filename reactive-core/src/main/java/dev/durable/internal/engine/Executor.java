package dev.durable.internal.engine;

import dev.durable.Cancellation;
import dev.durable.Definition;
import dev.durable.DurableException;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobContext;
import dev.durable.JobDefinition;
import dev.durable.JobHandler;
import dev.durable.JsonCodec;
import dev.durable.Outcome;
import dev.durable.Outcome.KeyChange;
import dev.durable.PermanentFailureException;
import dev.durable.Signal;
import dev.durable.StepContext;
import dev.durable.StepHandler;
import dev.durable.UnknownTypeException;
import dev.durable.WorkflowDefinition;
import dev.durable.internal.Errors;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.OutcomeRow.LimitChange;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Runs one claimed row: finds its definition and step, decodes its state and invokes the handler
 * on the handler scheduler (never on the event loop that delivered the claim; the runs of a batch
 * together when that scheduler never blocks: {@link HandlerLane}) under the type's timeout, turns
 * what happened into an outcome of the claim and commits it through the group committer. A handler
 * that answers at once costs no timer and no subscription to the stop ({@link LateRace}). An inline {@code next} runs the following step on the same claim once its transition
 * is committed (and its rate limit, if it keeps one, afforded the step). When the scheduler stops
 * the run (its instance was cancelled, or its claim was lost), the handler's subscription is
 * disposed and, for a cancel, a cancel is committed in place of its outcome (a lost claim commits
 * nothing: the reaper returns its row). Never errors: whatever the handler does
 * becomes an outcome.
 */
final class Executor {

    private static final Logger log = Loggers.getLogger(Executor.class);
    private static final int MAX_ERROR_LENGTH = 4000;
    /** How long work this engine handed back unrun waits before any engine picks it again. */
    static final Duration DEFER_HOLD = Duration.ofSeconds(5);
    /** Micrometer's ObservationThreadLocalAccessor.KEY, spelled out so context-propagation stays optional. */
    private static final String OBSERVATION_KEY = "micrometer.observation";

    /** How a run ended, from the scheduler's point of view. */
    enum RunResult {
        /** The outcome is committed. */
        COMMITTED,
        /** The outcome was dropped: the worker no longer owned the row. */
        STALE,
        /** The commit failed; the row's lease expires and the reaper returns it. */
        NOT_COMMITTED
    }

    /**
     * What the scheduler gave the run to steer by: whether a stop was for a lost claim, and whom to
     * tell once only the commit of the run's last outcome is left.
     */
    private record Control(BooleanSupplier claimLost, Runnable committing) {
    }

    /**
     * The outcome to commit and, for an inline next, the claim to run after it; or, for a run the
     * scheduler stopped because its claim was lost, the outcome it would have written, not committed.
     */
    private record Decision(OutcomeRow outcome, @Nullable ClaimedRow inlineNext, boolean lost,
            OutcomeCommit.@Nullable Committed committedInRun) {

        static Decision of(OutcomeRow outcome) {
            return new Decision(outcome, null, false, null);
        }

        static Decision claimLost(OutcomeRow outcome) {
            return new Decision(outcome, null, true, null);
        }

        /** A transactional run's outcome, already committed in its transaction with the handler's writes. */
        static Decision committedInRun(OutcomeRow outcome, OutcomeCommit.Committed committed) {
            return new Decision(outcome, null, false, committed);
        }
    }

    private final Map<String, Definition> definitions;
    private final RequestMapper mapper;
    private final JsonCodec codec;
    private final OutcomeCommitter committer;
    private final HandlerLane lane;
    private final long leaseMillis;
    private final Transitions transitions;
    private final Telemetry telemetry;
    private final ClaimMigration migration;
    private final TransactionalRuns transactional;

    Executor(Map<String, Definition> definitions, RequestMapper mapper, JsonCodec codec, OutcomeCommitter committer,
            HandlerLane lane, Duration leaseTtl, Transitions transitions, Telemetry telemetry,
            ClaimMigration migration, TransactionalRuns transactional) {
        this.migration = migration;
        this.transactional = transactional;
        this.telemetry = telemetry;
        this.definitions = definitions;
        this.mapper = mapper;
        this.codec = codec;
        this.committer = committer;
        this.lane = lane;
        this.leaseMillis = leaseTtl.toMillis();
        this.transitions = transitions;
    }

    /**
     * Runs the row (and its inline successors) and commits; emits how that went, never an error.
     * The queue's {@code admission} draws each inline step's rate and window slots before it runs,
     * hears of each inline step about to run on the same claim once its transition committed (to give
     * back a gate slot the step left), and of the run's end (to give back the slot it held). The run
     * calls {@code committing} once only its last outcome's commit is left ({@link Runner}).
     */
    Mono<RunResult> run(ClaimedRow row, Cancellation cancellation, BooleanSupplier claimLost, Runnable committing,
            Admission admission) {
        return Mono.defer(() -> runStep(row, cancellation, new Control(claimLost, committing), admission))
                .onErrorResume(error -> {
                    log.warn("outcome of instance {} not committed ({}); its lease will expire and"
                            + " the reaper returns it", row.id(), error.toString());
                    return Mono.just(RunResult.NOT_COMMITTED);
                })
                .doOnNext(result -> admission.runEnded(row.id(), result != RunResult.NOT_COMMITTED));
    }

    private Mono<RunResult> runStep(ClaimedRow row, Cancellation cancellation, Control control, Admission admission) {
        Definition definition = definitions.get(row.type());
        Telemetry.Run run = telemetry.runStarted(row);
        // Stopped for a cancel, the run ends cancelled; stopped for a lost claim, it commits nothing:
        // a lapsed lease may still pass the commit's guard until the reaper comes, and a cancel
        // written then would end an instance nobody cancelled.
        java.util.concurrent.Callable<Decision> stopped = () -> control.claimLost().getAsBoolean()
                ? Decision.claimLost(OutcomeRow.cancelled(row, List.of()))
                : Decision.of(OutcomeRow.cancelled(row, List.of()));
        // Decoding and the handler's own work start on the handler scheduler: the claim arrives on
        // a database event loop, which must never decode JSON or run user code. The runs of a batch
        // hop there together when that scheduler never blocks (HandlerLane).
        Mono<Decision> decided = Mono.defer(() -> {
                    lane.landed();
                    if (cancellation.isRequested()) {
                        return Mono.fromCallable(stopped);
                    }
                    Mono<Decision> decision;
                    if (definition == null || row.typeVersion() > definition.version()) {
                        return Mono.just(Decision.of(deferred(row, definition == null
                                ? "type '" + row.type() + "' is unknown"
                                : "version " + row.typeVersion() + " of " + row.type() + " is newer than "
                                        + definition.version())));
                    }
                    if (definition instanceof JobDefinition<?, ?> job) {
                        decision = decideJob(job, row, cancellation, run);
                    } else {
                        WorkflowDefinition<?> workflow = (WorkflowDefinition<?>) definition;
                        decision = ClaimMigration.needed(workflow, row)
                                ? migrateThenDecide(workflow, row, cancellation, run)
                                : decideWorkflow(workflow, row, cancellation, run);
                    }
                    // A run that ends at once never waits for the stop: no subscription to it.
                    return LateRace.until(decision, cancellation.requested(), stopped);
                })
                .subscribeOn(lane.scheduler());
        return decided
                // Spans the handler makes become children of the run's observation.
                .contextWrite(context -> context.put(OBSERVATION_KEY, run.observation()))
                .flatMap(decision -> commit(decision, run, cancellation, control, admission));
    }

    /**
     * An inline step runs on its claim with no pick to admit it, so it draws its rate and window
     * slots here ({@link Admission#draw}), before its transition commits; a limit that refuses them
     * (or a limiter that cannot be asked) sends the step back through the queue instead, where a pick
     * admits it.
     */
    private Mono<RunResult> commit(Decision decision, Telemetry.Run run, Cancellation cancellation,
            Control control, Admission admission) {
        ClaimedRow next = decision.inlineNext();
        if (next == null || next.rate() == null && next.window() == null) {
            return commitDrawn(decision, run, cancellation, control, admission);
        }
        return admission.draw(next)
                .flatMap(drawn -> commitDrawn(drawn ? decision : Decision.of(decision.outcome().throughQueue()), run,
                        cancellation, control, admission));
    }

    private Mono<RunResult> commitDrawn(Decision decision, Telemetry.Run run, Cancellation cancellation,
            Control control, Admission admission) {
        // The run's span context goes with its outcome: the instance's next run links to it.
        OutcomeRow outcome = decision.outcome().tracedBy(run.traceContext());
        if (decision.lost()) {
            run.ended(outcome, null);
            log.info("run of instance {} stopped: worker {} lost its lease", outcome.id(), outcome.worker());
            return Mono.just(RunResult.STALE);
        }
        OutcomeCommit.Committed inRun = decision.committedInRun();
        if (inRun != null) {
            inRun.wokenParents().forEach(transitions::wokenParent);
            inRun.spawned().forEach(transitions::spawned);
            return afterCommit(decision, outcome, Optional.of(inRun.transitions().get(0)), run, cancellation,
                    control, admission);
        }
        if (decision.inlineNext() == null) {
            // No handler runs after this commit on this claim: the run slot can go to the next row
            // while the outcome waits for its group commit.
            control.committing().run();
        }
        return committer.commit(outcome)
                // An inline next whose new concurrency key is executing elsewhere cannot keep its
                // claim: it goes back through the queue, where the pick waits for the key.
                .onErrorResume(error -> outcome.status() == InstanceStatus.EXECUTING && Errors.isExecutingKeyTaken(error),
                        taken -> committer.commit(outcome.throughQueue()))
                // An outcome the database refuses as such (a child whose correlation key is live, a
                // value it cannot store) would be refused again on every retry: fail the instance
                // with the reason instead, rather than leaving it to the reaper attempt after attempt.
                .onErrorResume(error -> outcome.status() != InstanceStatus.FAILED && Errors.isRefusedOutcome(error),
                        refused -> committer.commit(outcome.refusedBecause(truncate("outcome "
                                + outcome.status().sqlName() + " refused by the database: " + refused.getMessage()))))
                .doOnError(run::failedToCommit)
                .flatMap(committed -> afterCommit(decision, outcome, committed, run, cancellation, control,
                        admission));
    }

    private Mono<RunResult> afterCommit(Decision decision, OutcomeRow outcome, Optional<Transition> committed,
            Telemetry.Run run, Cancellation cancellation, Control control, Admission admission) {
        run.ended(outcome, committed.orElse(null));
        if (committed.isEmpty()) {
            // The run's claim is no longer current: its lease was lost, or a caller's transaction
            // completed the run first (engine.complete with the run's claim).
            log.info("stale outcome of instance {} dropped: worker {} no longer holds its claim (lease lost, or"
                    + " completed by a caller's transaction)", outcome.id(), outcome.worker());
            return Mono.just(RunResult.STALE);
        }
        Transition transition = committed.get();
        transitions.committed(transition);
        if (transition.status() == InstanceStatus.EXECUTING && decision.inlineNext() != null) {
            admission.inlineStep(decision.inlineNext());
            return runStep(decision.inlineNext(), cancellation, control, admission);
        }
        return Mono.just(RunResult.COMMITTED);
    }

    // ---- Jobs ----------------------------------------------------------------------------

    private <A, R> Mono<Decision> decideJob(JobDefinition<A, R> definition, ClaimedRow row,
            Cancellation cancellation, Telemetry.Run run) {
        A args;
        try {
            args = row.stateJson() == null ? null : codec.decode(row.stateJson(), definition.argsType());
        } catch (RuntimeException malformed) {
            return Mono.just(Decision.of(failed(row, "malformed arguments for "
                    + definition.argsType().getName() + ": " + malformed.getMessage())));
        }
        JobContext context = new JobContext(row.id(), row.type(), row.queue(), row.attempt(), row.maxAttempts(),
                cancellation, row.worker(), row.claimXid());
        A decoded = args;
        JobHandler.InTransaction<A, R> inTransaction = definition.transactionalHandler();
        if (inTransaction != null) {
            // A result that cannot be stored fails the run with its writes rolled back, not committed
            // beside a failed outcome.
            return inTransaction(definition, row, run, transaction -> LateRace.timeout(
                            Mono.defer(() -> inTransaction.handle(decoded, context, transaction)), definition.timeout())
                    .map(result -> {
                        OutcomeRow done = done(row, result, List.of());
                        if (done.status() == InstanceStatus.FAILED) {
                            throw new PermanentFailureException(done.error());
                        }
                        return done;
                    })
                    .defaultIfEmpty(done(row, null, List.of())));
        }
        return LateRace.timeout(Mono.defer(() -> definition.handler().handle(decoded, context)), definition.timeout())
                .map(result -> done(row, result, List.of()))
                .defaultIfEmpty(done(row, null, List.of()))
                .onErrorResume(error -> Mono.just(afterError(definition, row, error)))
                .map(Decision::of);
    }

    // ---- Workflows -----------------------------------------------------------------------

    private <S> Mono<Decision> decideWorkflow(WorkflowDefinition<S> definition, ClaimedRow row,
            Cancellation cancellation, Telemetry.Run run) {
        StepHandler<S> handler = definition.step(row.step());
        if (handler == null) {
            return Mono.just(Decision.of(deferred(row, "step '" + row.step() + "' of workflow " + row.type()
                    + " (version " + row.typeVersion() + " on the row, " + definition.version() + " here) is unknown")));
        }
        S state;
        try {
            state = row.stateJson() == null ? null : codec.decode(row.stateJson(), definition.stateType());
        } catch (RuntimeException malformed) {
            return Mono.just(Decision.of(failed(row, "malformed state for "
                    + definition.stateType().getName() + ": " + malformed.getMessage())));
        }
        Set<String> awaited = new HashSet<>(row.awaitedSignals());
        List<Signal> signals = row.inbox().stream().filter(signal -> awaited.contains(signal.name())).toList();
        StepContext<S> context = new StepContext<>(row.id(), row.type(), row.queue(), row.step(), row.attempt(),
                row.maxAttempts(), state, !awaited.isEmpty(), signals, row.inbox(), row.children(), codec,
                cancellation, row.worker(), row.claimXid());
        if (handler instanceof StepHandler.Transactional<S> inTransaction) {
            return inTransaction(definition, row, run, transaction -> LateRace.timeout(
                            Mono.defer(() -> inTransaction.run(context, transaction)), definition.timeout())
                    .switchIfEmpty(Mono.error(() -> new IllegalStateException("step '" + row.step()
                            + "' completed without an outcome")))
                    .map(outcome -> decide(outcome, row, signals, run).outcome()));
        }
        return LateRace.timeout(Mono.defer(() -> handler.run(context)), definition.timeout())
                .switchIfEmpty(Mono.error(() -> new IllegalStateException("step '" + row.step()
                        + "' completed without an outcome")))
                .map(outcome -> decide(outcome, row, signals, run))
                .onErrorResume(error -> Mono.just(Decision.of(afterError(definition, row, error))));
    }

    /**
     * An instance of an older version is migrated (and the migration written under its claim) before
     * its step runs. A migration that fails is the step's error: retried with the type's backoff, then
     * failed with the message naming type and versions, the row left at its old version and state. A
     * claim lost before the write commits nothing. Below the definition's lowest version (no path) the
     * pick never claims it; should it arrive anyway, it is handed back unrun, as is a row whose step
     * the chain maps to no step of this version (an old node may still run it as it is).
     */
    private <S> Mono<Decision> migrateThenDecide(WorkflowDefinition<S> definition, ClaimedRow row,
            Cancellation cancellation, Telemetry.Run run) {
        if (row.typeVersion() < definition.lowestVersion()) {
            return Mono.just(Decision.of(deferred(row, "version " + row.typeVersion() + " of " + row.type()
                    + " has no migration path to " + definition.version())));
        }
        return migration.migrate(definition, row)
                .flatMap(migrated -> decideWorkflow(definition, migrated, cancellation, run))
                .switchIfEmpty(Mono.fromSupplier(() -> Decision.claimLost(OutcomeRow.cancelled(row, List.of()))))
                .onErrorResume(ClaimMigration.MigrationFailedException.class,
                        failed -> Mono.just(Decision.of(failed.noPath() ? deferred(row, failed.getMessage())
                                : afterError(definition, row, failed))));
    }

    private Decision decide(Outcome<?> outcome, ClaimedRow row, List<Signal> signals, Telemetry.Run run) {
        List<Long> consumed = signals.stream().map(Signal::id).toList();
        return switch (outcome.kind()) {
            case NEXT -> next(outcome, row, consumed, run);
            case RETRY -> Decision.of(OutcomeRow.retryStep(row, outcome.delay().toMillis()));
            case AWAIT -> Decision.of(OutcomeRow.await(row, outcome.step(), encodeState(outcome.state()),
                    String.join(",", outcome.signals()),
                    outcome.timeout() == null ? null : outcome.timeout().toMillis(), consumed));
            case SPAWN -> Decision.of(OutcomeRow.spawn(row, outcome.step(), encodeState(outcome.state()),
                    // Children carry the spawning step's span context: their runs are its children.
                    outcome.children().isEmpty() ? List.of()
                            : mapper.toRows(outcome.children(), row.id(), run.traceContext()), consumed));
            case DONE -> Decision.of(done(row, outcome.result(), consumed));
            case FAIL -> Decision.of(OutcomeRow.failed(row, truncate(outcome.error()), consumed));
            case CANCEL -> Decision.of(OutcomeRow.cancelled(row, consumed));
        };
    }

    private Decision next(Outcome<?> outcome, ClaimedRow row, List<Long> consumed, Telemetry.Run run) {
        String state = encodeState(outcome.state());
        int gateShards = outcome.gate() == null ? 0 : mapper.gate(outcome.gate()).shards();
        if (outcome.rateChange() == Outcome.RateChange.SET) {
            mapper.checkRate(outcome.rateLimit().name(), outcome.rateLimit().weight());
        }
        if (outcome.windowChange() == Outcome.WindowChange.SET) {
            mapper.checkWindow(outcome.window().name(), outcome.window().weight());
        }
        LimitChange change = new LimitChange(outcome.keyChange(), outcome.concurrencyKey(), outcome.gate(), gateShards,
                outcome.rateChange(), outcome.rateLimit(), outcome.windowChange(), outcome.window());
        change = mapper.withFairness(row, outcome.fairnessChange(), outcome.fairnessKey(), change);
        if (!outcome.isInline()) {
            long delay = outcome.delay() == null ? 0L : outcome.delay().toMillis();
            return Decision.of(OutcomeRow.next(row, outcome.step(), state, delay, change, consumed));
        }
        String key = switch (outcome.keyChange()) {
            case KEEP -> row.concurrencyKey();
            case SET -> outcome.concurrencyKey();
            case RELEASE -> null;
            case GATE -> throw new IllegalStateException("a gate change is never inline");
        };
        // A new key (SET or RELEASE) leaves the gate, as the commit does to the row.
        Set<Long> gone = new HashSet<>(consumed);
        ClaimedRow continued = row.continuedAs(outcome.step(), state, key, outcome.keyChange() == KeyChange.KEEP,
                outcome.rateChange() == Outcome.RateChange.KEEP, outcome.windowChange() == Outcome.WindowChange.KEEP,
                row.inbox().stream().filter(signal -> !gone.contains(signal.id())).toList(), run.traceContext());
        return new Decision(OutcomeRow.inlineNext(row, outcome.step(), state, leaseMillis, change, consumed),
                continued, false, null);
    }

    private @Nullable String encodeState(@Nullable Object state) {
        return state == null ? null : mapper.encode("state", state);
    }

    // ---- Transactional handlers ------------------------------------------------------------

    /**
     * Runs a transactional handler ({@link TransactionalRuns}): its outcome commits in its transaction;
     * its error is retried or failed as any handler's, its statements rolled back; an outcome the
     * database refuses fails the instance with the reason, as a plain run's does.
     */
    private Mono<Decision> inTransaction(Definition definition, ClaimedRow row, Telemetry.Run run,
            Function<Connection, Mono<OutcomeRow>> handler) {
        return transactional.run(row, definition.timeout(), transaction -> handler.apply(transaction)
                        .map(outcome -> outcome.tracedBy(run.traceContext())))
                // Not known whether it committed (its connection or COMMIT failed): left to the lease.
                .doOnError(run::failedToCommit)
                .map(ended -> {
                    if (ended instanceof TransactionalRuns.Committed committed) {
                        return Decision.committedInRun(committed.outcome(), committed.committed());
                    }
                    if (ended instanceof TransactionalRuns.Stale stale) {
                        return Decision.claimLost(stale.outcome());
                    }
                    if (ended instanceof TransactionalRuns.Cancelled) {
                        return Decision.of(OutcomeRow.cancelled(row, List.of()));
                    }
                    if (ended instanceof TransactionalRuns.Refused refused) {
                        return Decision.of(refused.outcome().refusedBecause(truncate("outcome "
                                + refused.outcome().status().sqlName() + " refused by the database: "
                                + refused.error().getMessage())));
                    }
                    return Decision.of(afterError(definition, row, ((TransactionalRuns.HandlerFailed) ended).error()));
                });
    }

    // ---- Shared ----------------------------------------------------------------------------

    private OutcomeRow done(ClaimedRow row, @Nullable Object result, List<Long> consumed) {
        if (result == null) {
            return OutcomeRow.done(row, null, consumed);
        }
        try {
            return OutcomeRow.done(row, mapper.encode("result", result), consumed);
        } catch (DurableException unencodable) {
            return failed(row, unencodable.getMessage());
        }
    }

    private OutcomeRow afterError(Definition definition, ClaimedRow row, Throwable error) {
        String message = truncate(describe(error, definition.timeout()));
        boolean permanent = error instanceof PermanentFailureException || error instanceof InvalidRequestException
                || error instanceof UnknownTypeException;
        if (permanent || row.attempt() >= row.maxAttempts()) {
            return failed(row, message);
        }
        return OutcomeRow.retryAfterError(row, message, definition.backoff().delay(row.attempt()).toMillis());
    }

    /**
     * Work this engine cannot run goes back for an engine that can, unpaid: never failed because an
     * old node of a rolling deploy picked it. It waits {@link #DEFER_HOLD} so this engine does not
     * pick it again at once; the registry of live engines shows it if no engine ever can.
     */
    private OutcomeRow deferred(ClaimedRow row, String why) {
        log.warn("instance {} handed back unrun: {} on engine worker {}", row.id(), why, row.worker());
        return OutcomeRow.deferred(row, truncate(why + " on the engine that picked it (" + row.worker()
                + "); left for an engine that knows it"), DEFER_HOLD.toMillis());
    }

    private static OutcomeRow failed(ClaimedRow row, @Nullable String error) {
        return OutcomeRow.failed(row, truncate(error), List.of());
    }

    private static String describe(Throwable error, Duration timeout) {
        if (error instanceof TimeoutException) {
            return "timed out after " + timeout;
        }
        if (error instanceof ClaimMigration.MigrationFailedException) {
            return error.getMessage();
        }
        String message = error.getMessage();
        return error.getClass().getName() + (message == null ? "" : ": " + message);
    }

    private static @Nullable String truncate(@Nullable String error) {
        return error == null || error.length() <= MAX_ERROR_LENGTH ? error : error.substring(0, MAX_ERROR_LENGTH);
    }
}
