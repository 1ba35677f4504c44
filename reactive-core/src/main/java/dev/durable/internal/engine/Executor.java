package dev.durable.internal.engine;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.Child;
import dev.durable.Definition;
import dev.durable.DurableException;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobContext;
import dev.durable.JobDefinition;
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
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.OutcomeRow;
import dev.durable.internal.sql.Rows.Transition;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Runs one claimed row: finds its definition and step, decodes its state, invokes the handler on
 * the handler scheduler under the type's timeout, turns what happened into an outcome and commits
 * it through the group committer. An inline {@code next} runs the following step on the same claim
 * once its transition is committed. Never errors: whatever the handler does becomes an outcome.
 */
public final class Executor {

    private static final Logger log = Loggers.getLogger(Executor.class);
    private static final int MAX_ERROR_LENGTH = 4000;
    private static final ObjectMapper ROWS = new ObjectMapper();
    /** Micrometer's ObservationThreadLocalAccessor.KEY, spelled out so context-propagation stays optional. */
    private static final String OBSERVATION_KEY = "micrometer.observation";

    /** How a run ended, from the scheduler's point of view. */
    public enum RunResult {
        /** The outcome is committed. */
        COMMITTED,
        /** The outcome was dropped: the worker no longer owned the row. */
        STALE,
        /** The commit failed; the row's lease expires and the reaper returns it. */
        NOT_COMMITTED
    }

    /** A row's step as the handler sees it: the claimed row with its inbox and children read. */
    private record StepInput(ClaimedRow row, List<Signal> inbox, List<Child> children) {
    }

    /** The outcome to commit and, for an inline next, the step to run after it. */
    private record Decision(OutcomeRow outcome, @Nullable StepInput inlineNext) {
    }

    private final Map<String, Definition> definitions;
    private final RequestMapper mapper;
    private final JsonCodec codec;
    private final OutcomeCommitter committer;
    private final Scheduler handlerScheduler;
    private final long leaseMillis;
    private final Consumer<Transition> onCommitted;
    private final Telemetry telemetry;

    public Executor(Map<String, Definition> definitions, RequestMapper mapper, JsonCodec codec,
            OutcomeCommitter committer, Scheduler handlerScheduler, Duration leaseTtl,
            Consumer<Transition> onCommitted, Telemetry telemetry) {
        this.telemetry = telemetry;
        this.definitions = definitions;
        this.mapper = mapper;
        this.codec = codec;
        this.committer = committer;
        this.handlerScheduler = handlerScheduler;
        this.leaseMillis = leaseTtl.toMillis();
        this.onCommitted = onCommitted;
    }

    /**
     * Runs the row (and its inline successors) and commits; emits how that went, never an error.
     * {@code onInline} hears of each inline step about to run on the same claim once its transition
     * committed (so the scheduler can swap the gate slot it holds when the step changed key).
     */
    public Mono<RunResult> run(ClaimedRow row, String worker, Consumer<ClaimedRow> onInline) {
        return Mono.defer(() -> runStep(new StepInput(row, inbox(row.inboxJson()), children(row.childrenJson())), worker,
                        onInline))
                .onErrorResume(error -> {
                    log.warn("outcome of instance {} not committed ({}); its lease will expire and"
                            + " the reaper returns it", row.id(), error.toString());
                    return Mono.just(RunResult.NOT_COMMITTED);
                });
    }

    private Mono<RunResult> runStep(StepInput input, String worker, Consumer<ClaimedRow> onInline) {
        ClaimedRow row = input.row();
        Definition definition = definitions.get(row.type());
        Telemetry.Run run = telemetry.runStarted(row);
        Mono<Decision> decision;
        if (definition instanceof JobDefinition<?, ?> job) {
            decision = decideJob(job, row, worker);
        } else if (definition instanceof WorkflowDefinition<?> workflow) {
            decision = decideWorkflow(workflow, input, worker);
        } else {
            decision = Mono.just(new Decision(failed(row, worker, "unknown type '" + row.type()
                    + "': no definition is registered for it on the engine that picked it"), null));
        }
        return decision
                // Spans the handler makes become children of the run's observation.
                .contextWrite(context -> context.put(OBSERVATION_KEY, run.observation()))
                .flatMap(decided -> commit(new Decision(decided.outcome().claimedAt(row.attempt()), decided.inlineNext()),
                        worker, run, onInline));
    }

    private Mono<RunResult> commit(Decision decision, String worker, Telemetry.Run run,
            Consumer<ClaimedRow> onInline) {
        OutcomeRow outcome = decision.outcome();
        return committer.commit(outcome)
                // An inline next whose new concurrency key is executing elsewhere cannot keep its
                // claim: it goes back through the queue, where the pick waits for the key.
                .onErrorResume(error -> outcome.status() == InstanceStatus.EXECUTING && Errors.isExecutingKeyTaken(error),
                        taken -> committer.commit(throughQueue(outcome)))
                // An outcome the database refuses as such (a child whose correlation key is live, a
                // value it cannot store) would be refused again on every retry: fail the instance
                // with the reason instead, rather than leaving it to the reaper attempt after attempt.
                .onErrorResume(error -> outcome.status() != InstanceStatus.FAILED && Errors.isRefusedOutcome(error),
                        refused -> committer.commit(refusedOutcome(outcome, refused)))
                .doOnError(run::failedToCommit)
                .flatMap(committed -> {
                    run.ended(outcome, committed.orElse(null));
                    if (committed.isEmpty()) {
                        log.info("stale outcome of instance {} dropped: worker {} lost its lease", outcome.id(), worker);
                        return Mono.just(RunResult.STALE);
                    }
                    Transition transition = committed.get();
                    onCommitted.accept(transition);
                    if (transition.status() == InstanceStatus.EXECUTING && decision.inlineNext() != null) {
                        onInline.accept(decision.inlineNext().row());
                        return runStep(decision.inlineNext(), worker, onInline);
                    }
                    return Mono.just(RunResult.COMMITTED);
                });
    }

    // ---- Jobs ----------------------------------------------------------------------------

    private <A, R> Mono<Decision> decideJob(JobDefinition<A, R> definition, ClaimedRow row, String worker) {
        A args;
        try {
            args = row.stateJson() == null ? null : codec.decode(row.stateJson(), definition.argsType());
        } catch (RuntimeException malformed) {
            return Mono.just(new Decision(failed(row, worker, "malformed arguments for "
                    + definition.argsType().getName() + ": " + malformed.getMessage()), null));
        }
        JobContext context = new JobContext(row.id(), row.type(), row.queue(), row.attempt(), row.maxAttempts());
        A decoded = args;
        return Mono.defer(() -> definition.handler().handle(decoded, context))
                .subscribeOn(handlerScheduler)
                .timeout(definition.timeout())
                .map(result -> done(row, worker, result, List.of()))
                .defaultIfEmpty(done(row, worker, null, List.of()))
                .onErrorResume(error -> Mono.just(afterError(definition, row, worker, error)))
                .map(outcome -> new Decision(outcome, null));
    }

    // ---- Workflows -----------------------------------------------------------------------

    private <S> Mono<Decision> decideWorkflow(WorkflowDefinition<S> definition, StepInput input, String worker) {
        ClaimedRow row = input.row();
        StepHandler<S> handler = definition.step(row.step());
        if (handler == null) {
            return Mono.just(new Decision(failed(row, worker, "unknown step '" + row.step() + "' of workflow "
                    + row.type() + " (version " + row.typeVersion() + " on the row, " + definition.version()
                    + " registered): no handler for it on the engine that picked it"), null));
        }
        S state;
        try {
            state = row.stateJson() == null ? null : codec.decode(row.stateJson(), definition.stateType());
        } catch (RuntimeException malformed) {
            return Mono.just(new Decision(failed(row, worker, "malformed state for "
                    + definition.stateType().getName() + ": " + malformed.getMessage()), null));
        }
        Set<String> awaited = new HashSet<>(row.awaitedSignals());
        List<Signal> signals = input.inbox().stream().filter(signal -> awaited.contains(signal.name())).toList();
        StepContext<S> context = new StepContext<>(row.id(), row.type(), row.queue(), row.step(), row.attempt(),
                row.maxAttempts(), state, !awaited.isEmpty(), signals, input.inbox(), input.children(), codec);
        return Mono.defer(() -> handler.run(context))
                .subscribeOn(handlerScheduler)
                .timeout(definition.timeout())
                .switchIfEmpty(Mono.error(() -> new IllegalStateException("step '" + row.step()
                        + "' completed without an outcome")))
                .map(outcome -> decide(outcome, input, signals, worker))
                .onErrorResume(error -> Mono.just(new Decision(afterError(definition, row, worker, error), null)));
    }

    private Decision decide(Outcome<?> outcome, StepInput input, List<Signal> signals, String worker) {
        ClaimedRow row = input.row();
        List<Long> consumed = signals.stream().map(Signal::id).toList();
        switch (outcome.kind()) {
            case NEXT: {
                String state = encodeState(outcome.state());
                boolean inline = outcome.isInline();
                int gateShards = outcome.gate() == null ? 0 : mapper.gate(outcome.gate()).shards();
                if (outcome.rateChange() == Outcome.RateChange.SET) {
                    mapper.checkRate(outcome.rateLimit(), outcome.rateWeight());
                }
                OutcomeRow next = new OutcomeRow(row.id(), worker,
                        inline ? InstanceStatus.EXECUTING : InstanceStatus.RUNNABLE, outcome.step(), state, null,
                        null, inline ? null : outcome.delay() == null ? 0L : outcome.delay().toMillis(),
                        inline ? 1 : 0, leaseMillis, null, null, outcome.keyChange(), outcome.concurrencyKey(),
                        consumed, List.of(), row.parentId(), outcome.gate(), gateShards, outcome.rateChange(),
                        outcome.rateLimit(), outcome.rateWeight(), outcome.ratePartition(), row.attempt());
                StepInput following = null;
                if (inline) {
                    Set<Long> gone = new HashSet<>(consumed);
                    String key = switch (outcome.keyChange()) {
                        case KEEP -> row.concurrencyKey();
                        case SET -> outcome.concurrencyKey();
                        case RELEASE -> null;
                        case GATE -> throw new IllegalStateException("a gate change is never inline");
                    };
                    // A new key (SET or RELEASE) leaves the gate, as the commit does to the row.
                    boolean keepsGate = outcome.keyChange() == KeyChange.KEEP;
                    boolean keepsRate = outcome.rateChange() == Outcome.RateChange.KEEP;
                    ClaimedRow continued = new ClaimedRow(row.id(), row.type(), row.typeVersion(), row.queue(),
                            row.priority(), row.eligibleMicros(), outcome.step(), state, 1, row.maxAttempts(), key,
                            row.parentId(), List.of(), null, null, keepsGate ? row.gateName() : null,
                            keepsGate ? row.gateShard() : 0, keepsRate ? row.rateLimit() : null,
                            keepsRate ? row.rateWeight() : 0, keepsRate ? row.ratePartition() : null);
                    following = new StepInput(continued,
                            input.inbox().stream().filter(signal -> !gone.contains(signal.id())).toList(), List.of());
                }
                return new Decision(next, following);
            }
            case RETRY:
                return new Decision(new OutcomeRow(row.id(), worker, InstanceStatus.RUNNABLE, null, null, null, null,
                        outcome.delay().toMillis(), Math.max(row.attempt() - 1, 0), leaseMillis, null, null,
                        KeyChange.KEEP, null, List.of(), List.of(), row.parentId()), null);
            case AWAIT:
                return new Decision(new OutcomeRow(row.id(), worker, InstanceStatus.AWAITING_SIGNAL, outcome.step(),
                        encodeState(outcome.state()), null, null, null, 0, leaseMillis,
                        String.join(",", outcome.signals()),
                        outcome.timeout() == null ? null : outcome.timeout().toMillis(),
                        KeyChange.KEEP, null, consumed, List.of(), row.parentId()), null);
            case SPAWN: {
                if (outcome.children().isEmpty()) {
                    return new Decision(new OutcomeRow(row.id(), worker, InstanceStatus.RUNNABLE, outcome.step(),
                            encodeState(outcome.state()), null, null, 0L, 0, leaseMillis, null, null,
                            KeyChange.KEEP, null, consumed, List.of(), row.parentId()), null);
                }
                List<NewInstance> children = mapper.toRows(outcome.children(), row.id());
                return new Decision(new OutcomeRow(row.id(), worker, InstanceStatus.AWAITING_CHILDREN, outcome.step(),
                        encodeState(outcome.state()), null, null, null, 0, leaseMillis, null, null,
                        KeyChange.KEEP, null, consumed, children, row.parentId()), null);
            }
            case DONE:
                return new Decision(done(row, worker, outcome.result(), consumed), null);
            case FAIL:
                return new Decision(outcome(row, worker, InstanceStatus.FAILED, null, outcome.error(), null, consumed),
                        null);
            case CANCEL:
            default:
                return new Decision(outcome(row, worker, InstanceStatus.CANCELLED, null, null, null, consumed), null);
        }
    }

    private @Nullable String encodeState(@Nullable Object state) {
        return state == null ? null : mapper.encode("state", state);
    }

    private OutcomeRow refusedOutcome(OutcomeRow refused, Throwable error) {
        return new OutcomeRow(refused.id(), refused.worker(), InstanceStatus.FAILED, null, null, null,
                truncate("outcome " + refused.status().sqlName() + " refused by the database: " + error.getMessage()),
                null, null, leaseMillis, null, null, KeyChange.KEEP, null, List.of(), List.of(), refused.parentId())
                .claimedAt(refused.claimedAttempt());
    }

    private static OutcomeRow throughQueue(OutcomeRow inline) {
        return new OutcomeRow(inline.id(), inline.worker(), InstanceStatus.RUNNABLE, inline.step(), inline.stateJson(),
                null, null, 0L, 0, inline.leaseMillis(), null, null, inline.keyChange(), inline.newConcurrencyKey(),
                inline.consumedSignals(), List.of(), inline.parentId(), inline.newGate(), inline.gateShards(),
                inline.rateChange(), inline.rateLimit(), inline.rateWeight(), inline.ratePartition(),
                inline.claimedAttempt());
    }

    // ---- Shared ----------------------------------------------------------------------------

    private OutcomeRow done(ClaimedRow row, String worker, @Nullable Object result, List<Long> consumed) {
        if (result == null) {
            return outcome(row, worker, InstanceStatus.DONE, null, null, null, consumed);
        }
        try {
            return outcome(row, worker, InstanceStatus.DONE, mapper.encode("result", result), null, null, consumed);
        } catch (DurableException unencodable) {
            return failed(row, worker, unencodable.getMessage());
        }
    }

    private OutcomeRow afterError(Definition definition, ClaimedRow row, String worker, Throwable error) {
        String message = describe(error, definition.timeout());
        boolean permanent = error instanceof PermanentFailureException || error instanceof InvalidRequestException
                || error instanceof UnknownTypeException;
        if (permanent || row.attempt() >= row.maxAttempts()) {
            return failed(row, worker, message);
        }
        long delay = definition.backoff().delay(row.attempt()).toMillis();
        return outcome(row, worker, InstanceStatus.RUNNABLE, null, message, delay, List.of());
    }

    private OutcomeRow failed(ClaimedRow row, String worker, @Nullable String error) {
        return outcome(row, worker, InstanceStatus.FAILED, null, error, null, List.of());
    }

    private OutcomeRow outcome(ClaimedRow row, String worker, InstanceStatus status, @Nullable String result,
            @Nullable String error, @Nullable Long delayMillis, List<Long> consumed) {
        return new OutcomeRow(row.id(), worker, status, null, null, result, truncate(error), delayMillis, null,
                leaseMillis, null, null, KeyChange.KEEP, null, consumed, List.of(), row.parentId());
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

    private static List<Signal> inbox(@Nullable String json) {
        List<Signal> signals = new ArrayList<>();
        for (JsonNode node : parse(json)) {
            signals.add(new Signal(node.get("id").asLong(), node.get("name").asText(), text(node, "payload"),
                    Instant.parse(normalizeTimestamp(node.get("at").asText()))));
        }
        return signals;
    }

    private static List<Child> children(@Nullable String json) {
        List<Child> children = new ArrayList<>();
        for (JsonNode node : parse(json)) {
            children.add(new Child(node.get("id").asLong(), node.get("type").asText(),
                    InstanceStatus.fromSql(node.get("status").asText()), text(node, "result"), text(node, "error")));
        }
        return children;
    }

    private static Iterable<JsonNode> parse(@Nullable String json) {
        if (json == null) {
            return List.of();
        }
        try {
            return ROWS.readTree(json);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("unreadable inbox or children from the database: " + e.getMessage(), e);
        }
    }

    private static @Nullable String text(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : value.asText();
    }

    /** json_build_object renders timestamptz like "2026-12-02T12:00:00.123+00:00". */
    private static String normalizeTimestamp(String timestamp) {
        return java.time.OffsetDateTime.parse(timestamp).toInstant().toString();
    }
}
