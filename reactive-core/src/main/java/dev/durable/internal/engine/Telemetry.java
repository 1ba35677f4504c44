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
 */
public final class Telemetry {

    private final Sinks.Many<JobEvent> events = Sinks.many().multicast().directBestEffort();
    /** Emitters are many threads; events go out one at a time, with no lock held while subscribers run. */
    private final SerializedEmitter<JobEvent> emitter = new SerializedEmitter<>(events);
    private final int eventBuffer;
    private final AtomicLong eventsDropped = new AtomicLong();
    private final MeterRegistry meters;
    private final ObservationRegistry observations;
    private final RunObservationConvention convention;
    /** Meters by name and tags: looked up on every run, so kept rather than registered again. */
    private final java.util.Map<String, io.micrometer.core.instrument.Meter> meterCache =
            new java.util.concurrent.ConcurrentHashMap<>();

    public Telemetry(MeterRegistry meters, ObservationRegistry observations,
            @Nullable RunObservationConvention convention, int eventBuffer) {
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
        emitter.emit(new JobEvent(kind, id, type, queue, step, attempt, Instant.now(), duration, error));
    }

    public void inserted(List<NewInstance> rows, List<Long> ids) {
        for (int i = 0; i < rows.size(); i++) {
            NewInstance row = rows.get(i);
            cached("durable.inserted", row.queue(), row.type(), "",
                    () -> meters.counter("durable.inserted", "queue", row.queue(), "type", row.type()), Counter.class)
                    .increment();
            if (listening()) {
                emit(Kind.INSERTED, ids.get(i), row.type(), row.queue(), row.step(), 0, null, null);
            }
        }
    }

    public void picked(String queue, Trigger trigger, List<ClaimedRow> rows) {
        cached("durable.pick.size", queue, "", "",
                () -> DistributionSummary.builder("durable.pick.size").tag("queue", queue).register(meters),
                DistributionSummary.class).record(rows.size());
        if (listening()) {
            for (ClaimedRow row : rows) {
                emit(Kind.PICKED, row.id(), row.type(), queue, row.step(), row.attempt(), null, null);
            }
        }
    }

    public void signalled(long id, String queue, boolean woken) {
        if (listening()) {
            emit(Kind.SIGNALLED, id, null, queue, null, 0, null, null);
            if (woken) {
                emit(Kind.WOKEN, id, null, queue, null, 0, null, null);
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
            emit(kind, transition.id(), null, transition.queue(), null, 0, null, null);
        }
    }

    public void wokenParent(Transition parent) {
        if (listening()) {
            emit(Kind.WOKEN, parent.id(), null, parent.queue(), null, 0, null, null);
        }
    }

    public void cancelled(long id, String queue) {
        if (listening()) {
            emit(Kind.CANCELLED, id, null, queue, null, 0, null, null);
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
        RunContext context = new RunContext(row.id(), row.type(), row.queue(), row.step(), row.attempt());
        Observation observation = DurableObservation.RUN
                .observation(convention, DefaultRunObservationConvention.INSTANCE, () -> context, observations)
                .start();
        if (listening()) {
            emit(Kind.STARTED, row.id(), row.type(), row.queue(), row.step(), row.attempt(), null, null);
        }
        return new Run(row, context, observation, System.nanoTime());
    }

    /** One run in progress. */
    public final class Run {
        private final ClaimedRow row;
        private final RunContext context;
        private final Observation observation;
        private final long startedNanos;

        private Run(ClaimedRow row, RunContext context, Observation observation, long startedNanos) {
            this.row = row;
            this.context = context;
            this.observation = observation;
            this.startedNanos = startedNanos;
        }

        public Observation observation() {
            return observation;
        }

        /** The outcome committed as {@code committed} (null: stale, dropped). */
        public void ended(OutcomeRow outcome, @Nullable Transition committed) {
            Kind kind = classify(outcome, committed);
            String name = kind.name().toLowerCase(java.util.Locale.ROOT);
            Duration duration = Duration.ofNanos(System.nanoTime() - startedNanos);
            context.outcome(name);
            observation.stop();
            cached("durable.run", row.queue(), row.type(), name, () -> Timer.builder("durable.run")
                    .tag("queue", row.queue()).tag("type", row.type()).tag("outcome", name).register(meters), Timer.class)
                    .record(duration.toNanos(), TimeUnit.NANOSECONDS);
            cached("durable.outcomes", row.queue(), row.type(), name, () -> Counter.builder("durable.outcomes")
                    .tag("queue", row.queue()).tag("type", row.type()).tag("outcome", name).register(meters), Counter.class)
                    .increment();
            if (listening()) {
                emit(kind, row.id(), row.type(), row.queue(), row.step(), row.attempt(), duration, outcome.error());
            }
        }

        /** The outcome could not be committed at all. */
        public void failedToCommit(Throwable error) {
            context.outcome("not_committed");
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
        counter("durable.throttled", counters.throttled, queue, null);
    }

    private void counter(String name, AtomicLong value, String queue, @Nullable String description) {
        FunctionCounter.builder(name, value, AtomicLong::get).tag("queue", queue).description(description)
                .register(meters);
    }
}
