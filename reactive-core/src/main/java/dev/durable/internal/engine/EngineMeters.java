package dev.durable.internal.engine;

import dev.durable.JobEvent.Kind;
import dev.durable.PickTrigger;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The engine's Micrometer meters: per queue and type for inserts and runs (timer and counter by
 * outcome), per queue for picks, reaps and each scheduler's saturation and counters. Meters looked
 * up on every run are kept once registered, so a run costs no registry lookup.
 */
final class EngineMeters {

    /** The outcome tag of each kind: lowercase names, made once. */
    static final String[] OUTCOME_NAMES = Arrays.stream(Kind.values())
            .map(kind -> kind.name().toLowerCase(Locale.ROOT)).toArray(String[]::new);

    private final MeterRegistry meters;
    /** Meters by name and tags: looked up on every run, so kept rather than registered again. */
    private final Map<String, Meter> meterCache = new ConcurrentHashMap<>();
    private final Map<RunKey, RunMeters> runMeters = new ConcurrentHashMap<>();

    /** The run meters of one queue and type. */
    private record RunKey(String queue, String type) {
    }

    EngineMeters(MeterRegistry meters, AtomicLong eventsDropped) {
        this.meters = meters;
        FunctionCounter.builder("durable.events.dropped", eventsDropped, AtomicLong::get)
                .description("events a slow subscriber's full buffer dropped")
                .register(meters);
    }

    void inserted(String queue, String type) {
        runMeters(queue, type).inserted().increment();
    }

    void picked(String queue, int rows) {
        cached("durable.pick.size", queue, "", "",
                () -> DistributionSummary.builder("durable.pick.size").tag("queue", queue).register(meters),
                DistributionSummary.class).record(rows);
    }

    void reaped(String queue) {
        meters.counter("durable.reaped", "queue", queue).increment();
    }

    /** A run of {@code queue} and {@code type} ended as {@code kind} after {@code nanos}. */
    void ran(String queue, String type, Kind kind, long nanos) {
        RunMeters run = runMeters(queue, type);
        run.timer(kind).record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
        run.counter(kind).increment();
    }

    private <M extends Meter> M cached(String name, String queue, String type, String outcome, Supplier<M> register,
            Class<M> kind) {
        String key = name + '\0' + queue + '\0' + type + '\0' + outcome;
        return kind.cast(meterCache.computeIfAbsent(key, k -> register.get()));
    }

    private RunMeters runMeters(String queue, String type) {
        RunKey key = new RunKey(queue, type);
        RunMeters found = runMeters.get(key);
        return found != null ? found : runMeters.computeIfAbsent(key, k -> new RunMeters(queue, type));
    }

    /** {@code durable.run} and {@code durable.outcomes} of one queue and type, registered on first use of each outcome. */
    private final class RunMeters {
        private final String queue;
        private final String type;
        private final AtomicReferenceArray<Timer> timers = new AtomicReferenceArray<>(Kind.values().length);
        private final AtomicReferenceArray<Counter> counters = new AtomicReferenceArray<>(Kind.values().length);

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

    // ---- Schedulers --------------------------------------------------------------------------

    /** Saturation gauges and counters of one scheduler, read from its own counters. */
    void register(QueueScheduler scheduler, int concurrency, int prefetch) {
        String queue = scheduler.queue();
        SchedulerCounters counters = scheduler.counters();
        Gauge.builder("durable.scheduler.running", scheduler, QueueScheduler::running).tag("queue", queue).register(meters);
        Gauge.builder("durable.scheduler.committing", scheduler, QueueScheduler::committing).tag("queue", queue)
                .register(meters);
        Gauge.builder("durable.scheduler.buffered", scheduler, QueueScheduler::buffered).tag("queue", queue).register(meters);
        Gauge.builder("durable.scheduler.concurrency", () -> concurrency).tag("queue", queue).register(meters);
        Gauge.builder("durable.scheduler.prefetch", () -> prefetch).tag("queue", queue).register(meters);
        for (PickTrigger trigger : PickTrigger.values()) {
            FunctionCounter.builder("durable.picks", counters.picksBy(trigger), AtomicLong::get)
                    .tag("queue", queue).tag("trigger", trigger.name().toLowerCase(Locale.ROOT))
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
        counter("durable.leases.lost", counters.leasesLost, queue,
                "held rows a heartbeat found no longer this worker's (dropped unstarted, or their run stopped)");
        counter("durable.runs.cancelled", counters.runsCancelled, queue,
                "held rows a heartbeat found cancelled (given back unstarted, or their run stopped)");
        FunctionCounter.builder("durable.throttled", counters.throttledByGate, AtomicLong::get).tag("queue", queue)
                .tag("limit", "gate").description("rows a full gate held back at a pick").register(meters);
        FunctionCounter.builder("durable.throttled", counters.throttledByRate, AtomicLong::get).tag("queue", queue)
                .tag("limit", "rate").description("rows an empty bucket held back at a pick").register(meters);
    }

    private void counter(String name, AtomicLong value, String queue, @Nullable String description) {
        FunctionCounter.builder(name, value, AtomicLong::get).tag("queue", queue).description(description)
                .register(meters);
    }
}
