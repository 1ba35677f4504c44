package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.JobEvent;
import dev.durable.JobEvent.Kind;
import dev.durable.PickTrigger;
import dev.durable.internal.SerializedEmitter;
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
import dev.durable.Signal;
import dev.durable.observation.TracePropagation;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.BufferOverflowStrategy;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;

/**
 * The engine's one place for events, meters and observations. Events go to a multicast sink that
 * never waits: each subscriber has its own bounded buffer that drops its oldest event (counted)
 * when the subscriber falls behind, so a slow or stalled subscriber never slows a pick. Nothing is
 * built for events while nobody subscribes.
 *
 * <p>Events of one instance come in the order of what happened to it. The one race is an insert:
 * a scheduler may pick the row (this engine's, by claim-on-insert or a poll) before the insert's
 * answer is back to say INSERTED. So while someone listens, each insert takes a ticket before its
 * statement goes, and events emitted while older tickets are open wait until those inserts have
 * said INSERTED (or failed). The other race is a re-pick: a run's retry or next step commits, and
 * a poll picks the row again before the run has said RETRIED or STEPPED. So while someone listens,
 * a PICKED of an instance whose earlier run on this engine has not ended waits for that run's
 * event, with whatever else comes for the instance meanwhile. Without listeners none of this is
 * tracked and nothing costs more than a volatile read.
 */
public final class Telemetry {

    private final Sinks.Many<JobEvent> events = Sinks.many().multicast().directBestEffort();
    /** Guards the insert tickets and the events held for them. */
    private final Object order = new Object();
    private final java.util.TreeSet<Long> openInserts = new java.util.TreeSet<>();
    private final java.util.ArrayDeque<Held> held = new java.util.ArrayDeque<>();
    private long lastTicket;
    /** The runs in progress while someone listens, by instance. */
    private final java.util.Map<Long, java.util.Set<Run>> activeRuns = new java.util.HashMap<>();
    /** Events of an instance waiting for runs that were in progress when it was picked again. */
    private final java.util.Map<Long, Waiting> waiting = new java.util.HashMap<>();
    /** True while inserts are open, runs tracked or events held: emitters then take the ordered path. */
    private volatile boolean ordering;

    private record Waiting(java.util.Set<Run> blockers, List<JobEvent> events) {
    }
    /** Emitters are many threads; events go out one at a time, with no lock held while subscribers run. */
    private final SerializedEmitter<JobEvent> emitter = new SerializedEmitter<>(events);
    private final int eventBuffer;
    private final AtomicLong eventsDropped = new AtomicLong();
    private final MeterRegistry meters;
    private final ObservationRegistry observations;
    private final RunObservationConvention convention;
    /** Reads each run's span context (for its children and the next run's link); NONE: never. */
    private final TracePropagation tracing;
    /** Meters by name and tags: looked up on every run, so kept rather than registered again. */
    private final java.util.Map<String, io.micrometer.core.instrument.Meter> meterCache =
            new java.util.concurrent.ConcurrentHashMap<>();

    public Telemetry(MeterRegistry meters, ObservationRegistry observations,
            @Nullable RunObservationConvention convention, int eventBuffer) {
        this(meters, observations, convention, eventBuffer, TracePropagation.NONE);
    }

    public Telemetry(MeterRegistry meters, ObservationRegistry observations,
            @Nullable RunObservationConvention convention, int eventBuffer, TracePropagation tracing) {
        this.tracing = tracing;
        this.meters = meters;
        this.observations = observations;
        this.convention = convention;
        this.eventBuffer = eventBuffer;
        FunctionCounter.builder("durable.events.dropped", eventsDropped, AtomicLong::get)
                .description("events a slow subscriber's full buffer dropped")
                .register(meters);
    }

    // ---- Events ------------------------------------------------------------------------------

    /** The event stream; each subscriber gets a bounded buffer of its own. */
    public Flux<JobEvent> events() {
        return events.asFlux().onBackpressureBuffer(eventBuffer, dropped -> eventsDropped.incrementAndGet(),
                BufferOverflowStrategy.DROP_OLDEST);
    }

    public long eventsDropped() {
        return eventsDropped.get();
    }

    private boolean listening() {
        return events.currentSubscriberCount() > 0;
    }

    private void emit(Kind kind, long id, @Nullable String type, String queue, @Nullable String step, int attempt,
            @Nullable Duration duration, @Nullable String error) {
        publish(new JobEvent(kind, id, type, queue, step, attempt, Instant.now(), duration, error), false);
    }

    private void publish(JobEvent event, boolean pick) {
        if (!ordering) {
            emitter.emit(event);
            return;
        }
        synchronized (order) {
            Waiting wait = waiting.get(event.id());
            if (wait != null) {
                wait.events().add(event);
                return;
            }
            java.util.Set<Run> running = pick ? activeRuns.get(event.id()) : null;
            if (running != null && !running.isEmpty()) {
                waiting.put(event.id(), new Waiting(new java.util.HashSet<>(running),
                        new ArrayList<>(List.of(event))));
                return;
            }
            afterInserts(event);
        }
    }

    /** Emits the event, or holds it behind the inserts open now; under {@code order}. */
    private void afterInserts(JobEvent event) {
        if (openInserts.isEmpty() && held.isEmpty()) {
            emitter.emit(event);
            return;
        }
        held.add(new Held(event, lastTicket));
        release();
    }

    /** An event waiting until every insert up to {@code ticket} has said INSERTED. */
    private record Held(JobEvent event, long ticket) {
    }

    /** Emits the held events no open insert can precede; under {@code order}. */
    private void release() {
        long oldestOpen = openInserts.isEmpty() ? Long.MAX_VALUE : openInserts.first();
        while (!held.isEmpty() && held.peek().ticket() < oldestOpen) {
            emitter.emit(held.poll().event());
        }
        refreshOrdering();
    }

    /** Under {@code order}. */
    private void refreshOrdering() {
        ordering = !openInserts.isEmpty() || !held.isEmpty() || !activeRuns.isEmpty() || !waiting.isEmpty();
    }

    /** An insert about to send its statement: its ticket, or 0 while nobody listens. */
    public long insertStarting() {
        if (!listening()) {
            return 0L;
        }
        synchronized (order) {
            long ticket = ++lastTicket;
            openInserts.add(ticket);
            ordering = true;
            return ticket;
        }
    }

    /** The insert of {@code ticket} said INSERTED, failed or was cancelled: what waited for it goes. */
    public void insertEnded(long ticket) {
        if (ticket == 0L) {
            return;
        }
        synchronized (order) {
            openInserts.remove(ticket);
            release();
        }
    }

    /**
     * INSERTED for each row. Sent at once, ahead of events held for this insert's ticket: those
     * are the only events that can be about its rows.
     */
    public void inserted(List<NewInstance> rows, List<Long> ids) {
        for (int i = 0; i < rows.size(); i++) {
            NewInstance row = rows.get(i);
            runMeters(row.queue(), row.type()).inserted().increment();
            if (listening()) {
                emitter.emit(new JobEvent(Kind.INSERTED, ids.get(i), row.type(), row.queue(), row.step(), 0,
                        Instant.now(), null, null));
            }
        }
    }

    public void picked(String queue, Trigger trigger, List<ClaimedRow> rows) {
        cached("durable.pick.size", queue, "", "",
                () -> DistributionSummary.builder("durable.pick.size").tag("queue", queue).register(meters),
                DistributionSummary.class).record(rows.size());
        if (listening()) {
            for (ClaimedRow row : rows) {
                publish(new JobEvent(Kind.PICKED, row.id(), row.type(), queue, row.step(), row.attempt(),
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
            emitter.emit(new JobEvent(Kind.SIGNALLED, id, type, queue, null, 0, Instant.now(), null, null));
            if (woken) {
                emitter.emit(new JobEvent(Kind.WOKEN, id, type, queue, null, 0, Instant.now(), null, null));
            }
        }
    }

    /** A row the reaper or a reclaim recovered, or an await that expired. */
    public void recovered(Transition transition, boolean expiredAwait) {
        if (!expiredAwait) {
            meters.counter("durable.reaped", "queue", transition.queue()).increment();
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
        if (listening()) {
            emit(Kind.CANCELLED, id, type, queue, null, 0, null, null);
        }
    }

    private <M extends io.micrometer.core.instrument.Meter> M cached(String name, String queue, String type,
            String outcome, java.util.function.Supplier<M> register, Class<M> kind) {
        String key = name + '\0' + queue + '\0' + type + '\0' + outcome;
        return kind.cast(meterCache.computeIfAbsent(key, k -> register.get()));
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
            synchronized (order) {
                activeRuns.computeIfAbsent(row.id(), id -> new java.util.HashSet<>()).add(run);
                run.tracked = true;
                ordering = true;
            }
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
        /** Counted in {@code activeRuns}; written under {@code order}, read without it to skip the lock. */
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
                context.outcome(OUTCOME_NAMES[kind.ordinal()]);
            }
            observation.stop();
            RunMeters runMeters = runMeters(row.queue(), row.type());
            runMeters.timer(kind).record(nanos, TimeUnit.NANOSECONDS);
            runMeters.counter(kind).increment();
            // Nothing is built for the event while nobody listens and the run was not tracked.
            if (!tracked && !listening()) {
                return;
            }
            JobEvent end = new JobEvent(kind, row.id(), row.type(), row.queue(), row.step(), row.attempt(),
                    Instant.now(), Duration.ofNanos(nanos), outcome.error());
            if (!untrack(end) && listening()) {
                publish(end, false);
            }
        }

        /**
         * Stops counting this run; its end event, when tracked, goes ahead of the events of its
         * instance that waited for it (a later pick), or behind them when they waited for another
         * run. Returns whether the event was handled here.
         */
        private boolean untrack(@Nullable JobEvent end) {
            synchronized (order) {
                if (!tracked) {
                    return false;
                }
                tracked = false;
                long id = row.id();
                java.util.Set<Run> running = activeRuns.get(id);
                if (running != null && running.remove(this) && running.isEmpty()) {
                    activeRuns.remove(id);
                }
                Waiting wait = waiting.get(id);
                if (wait != null && !wait.blockers().contains(this)) {
                    if (end != null) {
                        wait.events().add(end);
                    }
                } else {
                    if (end != null) {
                        afterInserts(end);
                    }
                    if (wait != null) {
                        wait.blockers().remove(this);
                        if (wait.blockers().isEmpty()) {
                            waiting.remove(id);
                            wait.events().forEach(Telemetry.this::afterInserts);
                        }
                    }
                }
                refreshOrdering();
                return true;
            }
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

    /** The outcome tag of each kind: lowercase names, made once. */
    private static final String[] OUTCOME_NAMES = java.util.Arrays.stream(Kind.values())
            .map(kind -> kind.name().toLowerCase(java.util.Locale.ROOT)).toArray(String[]::new);

    /** The run meters of one queue and type, registered on first use of each outcome. */
    private record RunKey(String queue, String type) {
    }

    private final java.util.Map<RunKey, RunMeters> runMeters = new java.util.concurrent.ConcurrentHashMap<>();

    private RunMeters runMeters(String queue, String type) {
        RunKey key = new RunKey(queue, type);
        RunMeters found = runMeters.get(key);
        return found != null ? found : runMeters.computeIfAbsent(key, k -> new RunMeters(queue, type));
    }

    /** {@code durable.run} and {@code durable.outcomes} of one queue and type, by outcome. */
    private final class RunMeters {
        private final String queue;
        private final String type;
        private final java.util.concurrent.atomic.AtomicReferenceArray<Timer> timers =
                new java.util.concurrent.atomic.AtomicReferenceArray<>(Kind.values().length);
        private final java.util.concurrent.atomic.AtomicReferenceArray<Counter> counters =
                new java.util.concurrent.atomic.AtomicReferenceArray<>(Kind.values().length);

        private volatile @Nullable Counter inserted;

        private RunMeters(String queue, String type) {
            this.queue = queue;
            this.type = type;
        }

        Counter inserted() {
            Counter counter = inserted;
            if (counter == null) {
                counter = cached("durable.inserted", queue, type, "",
                        () -> meters.counter("durable.inserted", "queue", queue, "type", type), Counter.class);
                inserted = counter;
            }
            return counter;
        }

        Timer timer(Kind kind) {
            Timer timer = timers.get(kind.ordinal());
            if (timer == null) {
                String name = OUTCOME_NAMES[kind.ordinal()];
                timer = cached("durable.run", queue, type, name, () -> Timer.builder("durable.run")
                        .tag("queue", queue).tag("type", type).tag("outcome", name).register(meters), Timer.class);
                timers.set(kind.ordinal(), timer);
            }
            return timer;
        }

        Counter counter(Kind kind) {
            Counter counter = counters.get(kind.ordinal());
            if (counter == null) {
                String name = OUTCOME_NAMES[kind.ordinal()];
                counter = cached("durable.outcomes", queue, type, name, () -> Counter.builder("durable.outcomes")
                        .tag("queue", queue).tag("type", type).tag("outcome", name).register(meters), Counter.class);
                counters.set(kind.ordinal(), counter);
            }
            return counter;
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
        String queue = scheduler.queue();
        SchedulerCounters counters = scheduler.counters();
        Gauge.builder("durable.scheduler.running", scheduler, QueueScheduler::running).tag("queue", queue).register(meters);
        Gauge.builder("durable.scheduler.buffered", scheduler, QueueScheduler::buffered).tag("queue", queue).register(meters);
        Gauge.builder("durable.scheduler.concurrency", () -> concurrency).tag("queue", queue).register(meters);
        Gauge.builder("durable.scheduler.prefetch", () -> prefetch).tag("queue", queue).register(meters);
        for (PickTrigger trigger : PickTrigger.values()) {
            FunctionCounter.builder("durable.picks", counters.picksBy(trigger), AtomicLong::get)
                    .tag("queue", queue).tag("trigger", trigger.name().toLowerCase(java.util.Locale.ROOT))
                    .register(meters);
        }
        counter("durable.picked", counters.picked, queue, null);
        FunctionCounter.builder("durable.pokes", counters.pokesHandled, AtomicLong::get).tag("queue", queue)
                .tag("result", "handled").register(meters);
        FunctionCounter.builder("durable.pokes", counters.pokesDropped, AtomicLong::get).tag("queue", queue)
                .tag("result", "dropped").register(meters);
        counter("durable.reclaimed", counters.reclaimed, queue, null);
        counter("durable.drained", counters.released, queue, "buffered rows given back at shutdown");
        counter("durable.drain.abandoned", counters.drainAbandoned, queue, "runs still going at the drain timeout");
        counter("durable.stale", counters.stale, queue, null);
        FunctionCounter.builder("durable.throttled", counters.throttledByGate, AtomicLong::get).tag("queue", queue)
                .tag("limit", "gate").description("rows a full gate held back at a pick").register(meters);
        FunctionCounter.builder("durable.throttled", counters.throttledByRate, AtomicLong::get).tag("queue", queue)
                .tag("limit", "rate").description("rows an empty bucket held back at a pick").register(meters);
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

    private void counter(String name, AtomicLong value, String queue, @Nullable String description) {
        FunctionCounter.builder(name, value, AtomicLong::get).tag("queue", queue).description(description)
                .register(meters);
    }
}
