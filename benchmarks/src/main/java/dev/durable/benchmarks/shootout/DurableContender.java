package dev.durable.benchmarks.shootout;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import dev.durable.observation.DurableTracingObservationHandler;
import dev.durable.observation.MicrometerTracePropagation;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.brave.bridge.BraveBaggageManager;
import io.micrometer.tracing.brave.bridge.BraveCurrentTraceContext;
import io.micrometer.tracing.brave.bridge.BravePropagator;
import io.micrometer.tracing.brave.bridge.BraveTracer;
import io.micrometer.tracing.brave.bridge.W3CPropagation;
import io.micrometer.tracing.handler.DefaultTracingObservationHandler;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * This library, tuned for throughput with the knobs its README documents: a wide queue
 * ({@code concurrency}), a claim buffer ({@code prefetch}) so a finished run refills with no round
 * trip, fat picks ({@code minDemand}), group commit of outcomes ({@code commitBatchSize},
 * {@code commitParallelism}), and handlers on {@code Schedulers.parallel()} since the handler never
 * blocks. Inserts go through {@code insertAll} (one round trip per batch) and poke the queue
 * locally, the default poke transport.
 */
final class DurableContender implements Contender {

    static final String SCHEMA = "shootout_durable";
    static final String QUEUE = "shootout";
    /** The queue's knobs; {@code -Dshootout.concurrency} and {@code -Dshootout.prefetch} change them for an experiment. */
    static final int CONCURRENCY = Integer.getInteger(Knobs.CONCURRENCY, 256);
    static final int PREFETCH = Integer.getInteger(Knobs.PREFETCH, 256);
    static final int MIN_DEMAND = 64;
    static final int COMMIT_BATCH = 256;
    static final int COMMIT_PARALLELISM = 2;
    /** How long each job's handler waits before it ends ({@code -Dshootout.handlerMillis}; 0, a no-op, unless set). */
    static final long HANDLER_MILLIS = Long.getLong(Knobs.HANDLER_MILLIS, 0);
    static final int BATCH = 1_000;

    /** The system properties an experiment sets; the scaling harness hands them on to its engines. */
    static final class Knobs {

        static final String CONCURRENCY = "shootout.concurrency";
        static final String PREFETCH = "shootout.prefetch";
        static final String HANDLER_MILLIS = "shootout.handlerMillis";

        private Knobs() {
        }

        /** The {@code -D} arguments that carry the knobs set in this JVM to another. */
        static List<String> asArguments() {
            List<String> arguments = new ArrayList<>();
            for (String name : List.of(CONCURRENCY, PREFETCH, HANDLER_MILLIS)) {
                String value = System.getProperty(name);
                if (value != null) {
                    arguments.add("-D" + name + "=" + value);
                }
            }
            return arguments;
        }
    }

    /**
     * What the engine runs: plain no-op jobs; {@code durable_traced}, trace context stored and followed
     * (Brave, W3C, every trace sampled, spans dropped); {@code durable_tx}, the no-op as a
     * transactional handler (its own transaction and commit per job, a connection held throughout).
     */
    enum Variant {
        PLAIN("durable"), TRACED("durable_traced"), TRANSACTIONAL("durable_tx");

        final String system;

        Variant(String system) {
            this.system = system;
        }
    }

    private final Target target;
    private final int connections;
    private final Variant variant;
    private final boolean traced;
    private DurableEngine engine;
    /** Tasks handed to Reactor's schedulers while this system runs (run hops, timers, polls): per job, a structural cost. */
    private final java.util.concurrent.atomic.AtomicLong scheduled = new java.util.concurrent.atomic.AtomicLong();
    /** While settles are watched: when each id's COMPLETED event arrived, and the seq each id carries. */
    private volatile Disposable completions;
    private final Map<Long, Long> completedAt = new ConcurrentHashMap<>();
    private final Map<Long, Long> seqById = new ConcurrentHashMap<>();
    private brave.Tracing tracing;
    private ObservationRegistry observations;

    DurableContender(Target target, int connections) {
        this(target, connections, Variant.PLAIN);
    }

    DurableContender(Target target, int connections, Variant variant) {
        this.target = target;
        this.connections = connections;
        this.variant = variant;
        this.traced = variant == Variant.TRACED;
    }

    /** Transactional runs get the pool's connections beyond the queue's pick, the commits and maintenance. */
    private int transactionalConcurrency() {
        return Math.max(1, connections - 1 - COMMIT_PARALLELISM - 1);
    }

    @Override
    public String name() {
        return variant.system;
    }

    @Override
    public String schema() {
        return variant == Variant.PLAIN ? SCHEMA : SCHEMA + "_" + variant.name().toLowerCase(java.util.Locale.ROOT);
    }

    @Override
    public String settings() {
        return "poolMaxSize " + connections + ", concurrency " + CONCURRENCY + ", prefetch " + PREFETCH
                + ", minDemand " + MIN_DEMAND + ", commitBatchSize " + COMMIT_BATCH + ", commitParallelism "
                + COMMIT_PARALLELISM + ", handlerScheduler parallel, local pokes, insertAll of " + BATCH
                + (HANDLER_MILLIS > 0 ? ", each handler waits " + HANDLER_MILLIS + " ms" : "")
                + (traced ? ", tracePropagation (Brave, W3C, all sampled, each insert under a request span)" : "")
                + (variant == Variant.TRANSACTIONAL ? ", the no-op transactional (transactionalConcurrency "
                        + transactionalConcurrency() + ")" : "");
    }

    @Override
    public void start() {
        scheduled.set(0);
        Schedulers.onScheduleHook("shootout-durable", task -> {
            scheduled.incrementAndGet();
            return task;
        });
        EngineOptions.Builder builder = EngineOptions.builder()
                .url(target.r2dbcUrl)
                .schema(schema())
                .poolMaxSize(connections)
                .handlerScheduler(Schedulers.parallel())
                .commitBatchSize(COMMIT_BATCH)
                .commitParallelism(COMMIT_PARALLELISM)
                .transactionalConcurrency(transactionalConcurrency())
                .queue(QueueOptions.builder(QUEUE).concurrency(CONCURRENCY).prefetch(PREFETCH)
                        .minDemand(MIN_DEMAND).build());
        if (traced) {
            tracing = brave.Tracing.newBuilder()
                    .traceId128Bit(true)
                    .supportsJoin(false)
                    .propagationFactory(new W3CPropagation())
                    .sampler(brave.sampler.Sampler.ALWAYS_SAMPLE)
                    // Recorded, then dropped (Brave logs each span when no handler is added).
                    .addSpanHandler(new brave.handler.SpanHandler() {
                    })
                    .build();
            BraveTracer tracer = new BraveTracer(tracing.tracer(),
                    new BraveCurrentTraceContext(tracing.currentTraceContext()), new BraveBaggageManager());
            BravePropagator propagator = new BravePropagator(tracing);
            observations = ObservationRegistry.create();
            observations.observationConfig().observationHandler(
                    new ObservationHandler.FirstMatchingCompositeObservationHandler(
                            new DurableTracingObservationHandler(tracer, propagator),
                            new DefaultTracingObservationHandler(tracer)));
            builder.observationRegistry(observations).tracePropagation(new MicrometerTracePropagation(tracer, propagator));
        }
        EngineOptions options = builder.build();
        JobDefinition<Long, Void> noop = variant == Variant.TRANSACTIONAL
                ? JobDefinition.transactional("noop", Long.class, (Long seq, dev.durable.JobContext context,
                        io.r2dbc.spi.Connection transaction) -> started(seq))
                : JobDefinition.of("noop", Long.class, DurableContender::started);
        engine = DurableEngine.builder(options).register(noop.queue(QUEUE)).build();
        engine.start().block(Duration.ofMinutes(1));
    }

    /** The no-op's work: the probe hears that the job started. */
    private static Mono<Void> started(Long seq) {
        Probe.started(seq);
        return handlerWork();
    }

    /** What each handler does after it starts: nothing, or wait {@link #HANDLER_MILLIS}. The scaling engines run it too. */
    static Mono<Void> handlerWork() {
        return HANDLER_MILLIS == 0 ? Mono.empty() : Mono.delay(Duration.ofMillis(HANDLER_MILLIS)).then();
    }

    @Override
    public int insertBatchSize() {
        return BATCH;
    }

    @Override
    public void insertBatch(List<Long> seqs) {
        List<JobRequest> requests = new ArrayList<>(seqs.size());
        for (Long seq : seqs) {
            requests.add(JobRequest.of("noop", seq));
        }
        List<Long> ids = traced(engine.insertAll(requests)).block(Duration.ofMinutes(1));
        if (completions != null && ids != null) {
            for (int i = 0; i < ids.size(); i++) {
                seqById.put(ids.get(i), seqs.get(i));
            }
        }
    }

    @Override
    public String activity() {
        return engine.queueStats().stream()
                .map(stats -> "picks " + stats.picks() + " (" + stats.picked() + " rows), pokes " + stats.pokesHandled()
                        + " (" + stats.pokesDropped() + " dropped), running " + stats.running() + ", committing "
                        + stats.committing() + ", buffered " + stats.buffered() + ", completed " + stats.completed())
                .findFirst().orElse("");
    }

    @Override
    public String settleSource() {
        return "COMPLETED events (published once the outcome's commit has answered), matched by id";
    }

    /** Subscribes to the events only now: the measured windows before pay for no subscriber. */
    @Override
    public void watchSettles() {
        completedAt.clear();
        seqById.clear();
        if (completions == null) {
            completions = engine.events()
                    .filter(event -> event.kind() == JobEvent.Kind.COMPLETED)
                    .subscribe(event -> completedAt.putIfAbsent(event.id(), System.nanoTime()));
        }
    }

    @Override
    public void reportSettles() {
        completedAt.forEach((id, nanos) -> {
            Long seq = seqById.get(id);
            if (seq != null) {
                Probe.settledAt(seq, nanos);
            }
        });
    }

    @Override
    public void insertOne(long seq) {
        traced(engine.insert(JobRequest.of("noop", seq))).block(Duration.ofMinutes(1));
    }

    /** Traced: the insert runs under a request's observation (a span), as a WebFlux request's would. */
    private <T> Mono<T> traced(Mono<T> insert) {
        if (!traced) {
            return insert;
        }
        return Mono.using(() -> Observation.start("request", observations),
                request -> insert.contextWrite(context -> context.put("micrometer.observation", request)),
                Observation::stop);
    }

    @Override
    public long committed(Target target, long insertedSoFar) {
        // A done row moves to the history table in the statement that settles it.
        return target.queryLong("SELECT count(*) FROM \"" + schema() + "\".durable_history WHERE status = 'done'");
    }

    @Override
    public void stop() {
        if (engine != null) {
            // What the scheduler did over the whole run (warm-up and latency phases included).
            engine.queueStats().forEach(stats -> Shootout.log("durable: queue %s: %d picks claimed %d rows"
                            + " (%.1f per pick), %d pokes (%d dropped), %d heartbeats, %d pick retries, %d pick failures,"
                            + " %d stale", stats.queue(), stats.picks(), stats.picked(),
                    stats.picked() / (double) Math.max(1, stats.picks()), stats.pokesHandled(), stats.pokesDropped(),
                    stats.heartbeats(), stats.pickRetries(), stats.pickFailures(), stats.stale()));
            long picked = engine.queueStats().stream().mapToLong(stats -> stats.picked()).sum();
            Shootout.log("durable: %d tasks handed to Reactor schedulers over the run, %.2f per job run",
                    scheduled.get(), scheduled.get() / (double) Math.max(1, picked));
            if (completions != null) {
                completions.dispose();
            }
            engine.closeLater().block(Duration.ofMinutes(1));
        }
        Schedulers.resetOnScheduleHook("shootout-durable");
        if (tracing != null) {
            tracing.close();
        }
    }
}
