package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.JobEvent;
import dev.durable.JobEvent.Kind;
import dev.durable.Signal;
import dev.durable.internal.engine.Demand.Trigger;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.observation.DefaultRunObservationConvention;
import dev.durable.observation.DurableObservation;
import dev.durable.observation.RunContext;
import dev.durable.observation.RunObservationConvention;
import dev.durable.observation.TraceLink;
import dev.durable.observation.TracePropagation;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The engine's one place for events, meters and observations: what happened to an instance is said
 * here once, and goes to the event stream in each instance's order ({@link EventOrder}), to the
 * meters ({@link EngineMeters}) and, for a run, to its observation (a span, when tracing is on).
 * Nothing is built for events while nobody subscribes.
 */
public final class Telemetry {

    private final EventOrder events;
    private final EngineMeters meters;
    /** Committed outcomes per queue, on their way to the fleet's minutes (durable_queue_minutes). */
    private final OutcomeTally tally = new OutcomeTally();
    private final ObservationRegistry observations;
    private final @Nullable RunObservationConvention convention;
    /** Reads each run's span context (for its children and the next run's link); NONE: never. */
    private final TracePropagation tracing;

    public Telemetry(MeterRegistry meters, ObservationRegistry observations,
            @Nullable RunObservationConvention convention, int eventBuffer) {
        this(meters, observations, convention, eventBuffer, TracePropagation.NONE);
    }

    public Telemetry(MeterRegistry meters, ObservationRegistry observations,
            @Nullable RunObservationConvention convention, int eventBuffer, TracePropagation tracing) {
        this.tracing = tracing;
        this.events = new EventOrder(eventBuffer);
        this.meters = new EngineMeters(meters, events.eventsDropped());
        this.observations = observations;
        this.convention = convention;
    }

    // ---- Events ------------------------------------------------------------------------------

    /** The event stream; each subscriber gets a bounded buffer of its own. */
    public Flux<JobEvent> events() {
        return events.events();
    }

    /** The committed outcomes counted for the fleet's minutes. */
    OutcomeTally tally() {
        return tally;
    }

    public long eventsDropped() {
        return events.eventsDropped().get();
    }

    private boolean listening() {
        return events.listening();
    }

    private void emit(Kind kind, long id, @Nullable String type, String queue, @Nullable String step, int attempt,
            @Nullable Duration duration, @Nullable String error) {
        events.publish(new JobEvent(kind, id, type, queue, step, attempt, Instant.now(), duration, error), false);
    }

    /**
     * {@code change} (an insert, a signal delivery) under an event-order ticket taken as it is sent:
     * events of its rows emitted by others meanwhile (a pick) wait until it has said what it did.
     */
    public <T> Mono<T> ordered(Mono<T> change) {
        return events.ordered(change);
    }

    /**
     * INSERTED for each row. Sent at once, ahead of events held for this insert's ticket: those
     * are the only events that can be about its rows.
     */
    public void inserted(List<NewInstance> rows, List<Long> ids) {
        for (int i = 0; i < rows.size(); i++) {
            NewInstance row = rows.get(i);
            meters.inserted(row.queue(), row.type());
            if (listening()) {
                events.emitNow(new JobEvent(Kind.INSERTED, ids.get(i), row.type(), row.queue(), row.step(), 0,
                        Instant.now(), null, null));
            }
        }
    }

    public void picked(String queue, Trigger trigger, List<ClaimedRow> rows) {
        meters.picked(queue, rows.size());
        if (listening()) {
            for (ClaimedRow row : rows) {
                events.publish(new JobEvent(Kind.PICKED, row.id(), row.type(), queue, row.step(), row.attempt(),
                        Instant.now(), null, null), true);
            }
        }
    }

    /**
     * SIGNALLED (and WOKEN) for a delivery, sent at once like INSERTED: the delivery ran under an
     * insert-style ticket, so a pick of the woken instance waits for these.
     */
    public void signalled(long id, String type, String queue, boolean woken) {
        if (listening()) {
            events.emitNow(new JobEvent(Kind.SIGNALLED, id, type, queue, null, 0, Instant.now(), null, null));
            if (woken) {
                events.emitNow(new JobEvent(Kind.WOKEN, id, type, queue, null, 0, Instant.now(), null, null));
            }
        }
    }

    /** A row the reaper recovered, or an await that expired. */
    public void recovered(Transition transition, boolean expiredAwait) {
        if (!expiredAwait) {
            meters.reaped(transition.queue());
        }
        takenBack(transition, expiredAwait);
    }

    /** A dead predecessor's claim taken back at start (durable.reclaimed counts it, not durable.reaped). */
    public void reclaimed(Transition transition) {
        takenBack(transition, false);
    }

    private void takenBack(Transition transition, boolean expiredAwait) {
        if (!expiredAwait) {
            tally.count(transition.queue(), transition.status() == InstanceStatus.FAILED ? OutcomeTally.Outcome.FAILED
                    : transition.status() == InstanceStatus.CANCELLED ? OutcomeTally.Outcome.CANCELLED
                    : OutcomeTally.Outcome.REAPED);
        }
        if (listening()) {
            Kind kind = expiredAwait ? Kind.WOKEN : transition.status() == InstanceStatus.FAILED ? Kind.FAILED
                    : transition.status() == InstanceStatus.CANCELLED ? Kind.CANCELLED : Kind.REAPED;
            emit(kind, transition.id(), transition.type(), transition.queue(), null, 0, null, null);
        }
    }

    public void wokenParent(Transition parent) {
        if (listening()) {
            emit(Kind.WOKEN, parent.id(), parent.type(), parent.queue(), null, 0, null, null);
        }
    }

    public void cancelled(long id, String type, String queue) {
        tally.count(queue, OutcomeTally.Outcome.CANCELLED);
        if (listening()) {
            emit(Kind.CANCELLED, id, type, queue, null, 0, null, null);
        }
    }

    // ---- Runs --------------------------------------------------------------------------------

    /** A run about to invoke its handler: emits STARTED and opens its observation. */
    public Run runStarted(ClaimedRow row) {
        RunContext context = null;
        Observation observation = Observation.NOOP;
        if (!observations.isNoop()) {
            // The stored context is restored whatever this engine's own setting: the span's parent and links.
            RunContext observed = new RunContext(row.id(), row.type(), row.queue(), row.step(), row.attempt(),
                    row.traceContext(), traceLinks(row));
            context = observed;
            observation = DurableObservation.RUN
                    .observation(convention, DefaultRunObservationConvention.INSTANCE, () -> observed, observations)
                    .start();
        }
        Run run = new Run(row, context, observation, System.nanoTime());
        if (listening()) {
            run.tracked = true;
            events.track(row.id(), run);
            emit(Kind.STARTED, row.id(), row.type(), row.queue(), row.step(), row.attempt(), null, null);
        }
        return run;
    }

    /**
     * The spans a run links to: the instance's previous run, and the senders of the awaited signals
     * in its inbox (those the step consumes). Nothing to build for a row that carries no trace.
     */
    private static List<TraceLink> traceLinks(ClaimedRow row) {
        if (row.traceLast() == null && row.signalTraces().isEmpty()) {
            return List.of();
        }
        List<TraceLink> links = new ArrayList<>();
        if (row.traceLast() != null) {
            links.add(new TraceLink(row.traceLast(), TraceLink.Reason.PREVIOUS_RUN));
        }
        for (Signal signal : row.inbox()) {
            String sender = row.signalTraces().get(signal.id());
            if (sender != null && row.awaitedSignals().contains(signal.name())) {
                links.add(new TraceLink(sender, TraceLink.Reason.SIGNAL));
            }
        }
        return links;
    }

    /** One run in progress. */
    public final class Run {
        private final ClaimedRow row;
        /** Null while nobody observes runs (a no-op observation registry). */
        private final @Nullable RunContext context;
        private final Observation observation;
        private final long startedNanos;
        /** Tracked by the event order (a re-pick of its instance waits for its end); read to skip its lock. */
        private volatile boolean tracked;
        /** The run's span context, read once (the run's steps follow one another, never at once). */
        private @Nullable String traceContext;
        private boolean traceRead;

        private Run(ClaimedRow row, @Nullable RunContext context, Observation observation, long startedNanos) {
            this.row = row;
            this.context = context;
            this.observation = observation;
            this.startedNanos = startedNanos;
        }

        public Observation observation() {
            return observation;
        }

        /**
         * The trace context of this run's span, for the children it spawns and the row's trace_last
         * (the next run links to it); null without tracing.
         */
        public @Nullable String traceContext() {
            if (!traceRead) {
                traceContext = tracing == TracePropagation.NONE ? null : tracing.capture(observation);
                traceRead = true;
            }
            return traceContext;
        }

        /** The outcome committed as {@code committed} (null: stale, dropped). */
        public void ended(OutcomeRow outcome, @Nullable Transition committed) {
            Kind kind = classify(outcome, committed);
            long nanos = System.nanoTime() - startedNanos;
            if (context != null) {
                context.outcome(EngineMeters.OUTCOME_NAMES[kind.ordinal()]);
            }
            observation.stop();
            meters.ran(row.queue(), row.type(), kind, nanos);
            switch (kind) {
                case COMPLETED -> tally.count(row.queue(), OutcomeTally.Outcome.COMPLETED);
                case FAILED -> tally.count(row.queue(), OutcomeTally.Outcome.FAILED);
                case RETRIED -> tally.count(row.queue(), OutcomeTally.Outcome.RETRIED);
                case CANCELLED -> tally.count(row.queue(), OutcomeTally.Outcome.CANCELLED);
                default -> { } // steps, parks and stale outcomes are not outcomes of the instance
            }
            // Nothing is built for the event while nobody listens and the run was not tracked.
            if (!tracked && !listening()) {
                return;
            }
            JobEvent end = new JobEvent(kind, row.id(), row.type(), row.queue(), row.step(), row.attempt(),
                    Instant.now(), Duration.ofNanos(nanos), outcome.error());
            if (!untrack(end) && listening()) {
                events.publish(end, false);
            }
        }

        /** Stops tracking this run; its end event, when tracked, goes out in its instance's order. */
        private boolean untrack(@Nullable JobEvent end) {
            if (!tracked) {
                return false;
            }
            tracked = false;
            return events.untrack(row.id(), this, end);
        }

        /** The outcome could not be committed at all. */
        public void failedToCommit(Throwable error) {
            untrack(null);
            if (context != null) {
                context.outcome("not_committed");
            }
            observation.error(error);
            observation.stop();
        }
    }

    private static Kind classify(OutcomeRow outcome, @Nullable Transition committed) {
        if (committed == null) {
            return Kind.STALE;
        }
        switch (committed.status()) {
            case DONE:
                return Kind.COMPLETED;
            case FAILED:
                return Kind.FAILED;
            case CANCELLED:
                return Kind.CANCELLED;
            case AWAITING_SIGNAL:
            case AWAITING_CHILDREN:
                return Kind.PARKED;
            case EXECUTING:
                return Kind.STEPPED;
            case RUNNABLE:
            default:
                if (outcome.status() == InstanceStatus.AWAITING_SIGNAL) {
                    return Kind.WOKEN; // its signal was already there when it parked
                }
                return outcome.error() != null ? Kind.RETRIED : Kind.STEPPED;
        }
    }

    // ---- Schedulers --------------------------------------------------------------------------

    /** Saturation gauges and counters of one scheduler, read from its own counters. */
    void register(QueueScheduler scheduler, int concurrency, int prefetch) {
        meters.register(scheduler, concurrency, prefetch);
    }

    /**
     * A pick of {@code queue} found {@code rows} rows held back by a full gate ({@code byGate}) or an
     * empty bucket: counted, and one THROTTLED event per pick and reason, naming one of the rows
     * ({@code sampleId} of {@code sampleType}) and saying how many there were.
     */
    void throttled(SchedulerCounters counters, String queue, boolean byGate, long rows, long sampleId,
            @Nullable String sampleType) {
        if (rows <= 0) {
            return;
        }
        counters.throttled.addAndGet(rows);
        (byGate ? counters.throttledByGate : counters.throttledByRate).addAndGet(rows);
        if (listening() && sampleType != null) {
            emit(Kind.THROTTLED, sampleId, sampleType, queue, null, 0, null,
                    rows + (rows == 1 ? " row" : " rows") + " held back by " + (byGate ? "a full gate" : "an empty bucket"));
        }
    }
}
