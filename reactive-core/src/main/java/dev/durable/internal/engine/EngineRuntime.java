package dev.durable.internal.engine;

import dev.durable.Definition;
import dev.durable.EngineOptions;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.QueueStats;
import dev.durable.RecurringJob;
import dev.durable.internal.Cleanup;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.sql.RegistrySql;
import dev.durable.internal.sql.Statements;
import dev.durable.internal.sql.Tables;
import dev.durable.internal.sql.VersionSql;
import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterContext;
import dev.durable.poke.PokeContext;
import dev.durable.poke.PokeTransport;
import io.r2dbc.spi.ConnectionFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The parts of an engine that exist while it runs, made by {@link #start} and taken apart by
 * {@link #close}: the limiter, the poke transport, one scheduler per queue with its pick,
 * admission, heartbeat and leases, the executor and its group committer, maintenance and the
 * recurring jobs. Immutable once made; the engine swaps it in and out atomically.
 */
public final class EngineRuntime {

    private static final Logger log = Loggers.getLogger(EngineRuntime.class);

    /**
     * What the runtime is made from: the engine's configuration and its long-lived parts.
     * {@code insert} is the engine's own insert (recurring jobs use it); every status change made
     * here goes through {@code transitions}, which pokes through this runtime's transport.
     */
    public record Wiring(EngineOptions options, ConnectionFactory connectionFactory, Map<String, Definition> definitions,
            List<RecurringJob> recurringJobs, Statements statements, WorkerIdentity identity, RequestMapper mapper,
            Telemetry telemetry, Function<JobRequest, Mono<Long>> insert, Transitions transitions) {
    }

    private final Limiter limiter;
    private final PokeTransport transport;
    private final List<QueueScheduler> schedulers;
    private final List<Leases> leases;
    private final MaintenanceTasks maintenance;
    private final Registry registry;
    private final RecurringRunner recurring;
    private final ClaimOnInsert claims;
    private final boolean runMaintenance;
    private final EngineOptions options;
    private final Transitions transitions;
    private final OutcomeTally tally;
    private final QueueDepthGauges depths;
    /** Where the outcome counts go: the fleet's minutes. */
    private final OutcomeTally.Store minutes;
    private final java.util.concurrent.atomic.AtomicReference<Mono<Void>> closing =
            new java.util.concurrent.atomic.AtomicReference<>();

    private EngineRuntime(Wiring wiring, Limiter limiter, PokeTransport transport) {
        EngineOptions options = wiring.options();
        Statements sql = wiring.statements();
        Telemetry telemetry = wiring.telemetry();
        this.options = options;
        this.limiter = limiter;
        this.transport = transport;
        this.runMaintenance = options.runMaintenance();
        this.transitions = wiring.transitions();
        this.tally = telemetry.tally();
        this.minutes = sql.activity()::add;
        transitions.pokeThrough(transport);
        HandlerLane lane = new HandlerLane(options.handlerScheduler());
        OutcomeCommit outcomeCommit = new OutcomeCommit(sql.db(), sql.outcomes(), sql.inserts());
        OutcomeCommitter committer = new OutcomeCommitter(outcomeCommit,
                options.commitBatchSize(), options.commitParallelism(), transitions, lane::holding);
        lane.afterDrain(committer::flush);
        Executor executor = new Executor(wiring.definitions(), wiring.mapper(), options.codec(), committer,
                lane, options.leaseTtl(), transitions, telemetry,
                new ClaimMigration(new VersionSql(sql.db(), new Tables(options.schema())), options.codec(),
                        options.handlerScheduler(), options.meterRegistry()),
                new TransactionalRuns(sql.db(), options.callTimeout(), sql.outcomes(), outcomeCommit,
                        options.transactionalConcurrency(), options.handlerScheduler()));
        long leaseMillis = options.leaseTtl().toMillis();
        RetryDelays delays = new RetryDelays(wiring.definitions());
        List<QueueScheduler> made = new ArrayList<>();
        List<Leases> madeLeases = new ArrayList<>();
        for (QueueOptions queue : options.queues().values()) {
            String name = queue.name();
            String worker = wiring.identity().worker(name);
            SchedulerCounters counters = new SchedulerCounters();
            QueueContext context = new QueueContext(name, worker, leaseMillis, counters);
            Admission admission = limiter.admitsInPick()
                    ? new InDatabaseAdmission(context, sql.picks(), limiter, telemetry)
                    : OutsideLimiterAdmission.of(queue, context, sql.db(), sql.picks().locked(), limiter, telemetry);
            Pick pick = new Pick(context, options.pickRetries(), sql.picks(), admission, queue.fairness());
            Heartbeat heartbeat = new Heartbeat(context, sql.leases(), admission);
            Leases queueLeases = new Leases(context, wiring.identity().prefix(name),
                    options.heartbeatInterval().toMillis(), sql.leases(), delays, admission, transitions);
            Runner runner = (row, cancellation, claimLost, committing) -> executor.run(row, cancellation,
                    claimLost, committing, admission);
            QueueScheduler scheduler = new QueueScheduler(queue, worker, pick, heartbeat, queueLeases, runner,
                    transport.pokes(), options.heartbeatInterval(), options.leaseTtl(), options.pokeWindow(),
                    Schedulers.parallel(), System::nanoTime,
                    counters, telemetry);
            telemetry.register(scheduler, queue.concurrency(), queue.prefetch());
            made.add(scheduler);
            madeLeases.add(queueLeases);
        }
        this.schedulers = List.copyOf(made);
        this.leases = List.copyOf(madeLeases);
        this.maintenance = new MaintenanceTasks(options, sql.leases(), sql.maintenance(),
                new dev.durable.internal.sql.FairSql(sql.db(), new Tables(options.schema())),
                new dev.durable.internal.sql.KeySql(sql.db(), new Tables(options.schema())),
                new dev.durable.internal.sql.StatisticsSql(sql.db(), options.schema()),
                new dev.durable.internal.sql.VacuumSql(sql.db(), options.schema()), limiter, delays,
                Schedulers.parallel(), transitions);
        this.recurring = new RecurringRunner(wiring.recurringJobs(), options.recurringInterval(),
                sql.instances().now(), wiring.insert(), RecurringJob::due);
        List<String> types = new ArrayList<>(wiring.definitions().keySet());
        this.registry = new Registry(sql.registry(), new RegistrySql.Entry(wiring.identity().origin(), options.name(),
                List.copyOf(options.queues().keySet()), types,
                types.stream().map(type -> wiring.definitions().get(type).version()).toList(),
                types.stream().map(type -> wiring.definitions().get(type).lowestVersion()).toList(),
                options.leaseTtl().toMillis()), Schedulers.parallel(), options.meterRegistry());
        this.depths = new QueueDepthGauges(sql.activity(), List.copyOf(options.queues().keySet()),
                options.meterRegistry(), Schedulers.parallel());
        this.claims = new ClaimOnInsert(schedulers, wiring.definitions().keySet(), registry::paused);
    }

    /**
     * Makes the limiter and the poke transport, then the queues' parts; reclaims each queue's dead
     * predecessor's rows and starts its scheduler, then maintenance and the recurring jobs. A
     * failure part way closes what was made, so a later start begins from scratch.
     */
    public static Mono<EngineRuntime> start(Wiring wiring) {
        EngineOptions options = wiring.options();
        WorkerIdentity identity = wiring.identity();
        return options.limiter().create(new LimiterContext(identity.origin(), wiring.connectionFactory(),
                        options.schema(), options.gates(), options.rateLimits(), options.windows(),
                        options.leaseTtl().plus(options.heartbeatInterval()), options.callTimeout()))
                .flatMap(limiter -> options.pokeTransport().create(new PokeContext(identity.origin(),
                                wiring.connectionFactory(), options.schema(), options.callTimeout()))
                        .onErrorResume(error -> quietly(limiter.close()).then(Mono.error(error)))
                        .flatMap(transport -> {
                            EngineRuntime runtime = new EngineRuntime(wiring, limiter, transport);
                            return runtime.startParts()
                                    .thenReturn(runtime)
                                    .onErrorResume(error -> quietly(runtime.close()).then(Mono.error(error)));
                        }));
    }

    private Mono<Void> startParts() {
        return registry.register()
                .thenMany(Flux.range(0, schedulers.size()))
                .concatMap(i -> leases.get(i).reclaim().then(Mono.fromRunnable(schedulers.get(i)::start)))
                .then(Mono.fromRunnable(() -> {
                    registry.start(options.heartbeatInterval());
                    tally.start(minutes, options.heartbeatInterval(), Schedulers.parallel());
                    depths.start(options.heartbeatInterval().multipliedBy(QueueDepthGauges.HEARTBEATS));
                    if (runMaintenance) {
                        maintenance.start();
                    }
                    recurring.start();
                }));
    }

    private static Mono<Void> quietly(Mono<Void> cleanup) {
        return cleanup.onErrorResume(error -> {
            log.warn("cleaning up after a failed start: {}", error.toString());
            return Mono.empty();
        });
    }

    /** The limiter this runtime made (permits outside jobs ask it). */
    public Limiter limiter() {
        return limiter;
    }

    public ClaimOnInsert claims() {
        return claims;
    }

    public Registry registry() {
        return registry;
    }

    public dev.durable.Maintenance maintenance() {
        return maintenance;
    }

    public List<QueueStats> queueStats() {
        return schedulers.stream().map(QueueScheduler::stats).toList();
    }

    /**
     * Stops maintenance and the recurring jobs, drains every scheduler (each gives its buffered rows
     * back and waits up to its drain timeout for running ones), then flushes the outcome counts and
     * closes the transport and the limiter, after the schedulers so their last counts, credits and
     * pokes go out. Errors are gathered.
     * Idempotent.
     */
    public Mono<Void> close() {
        return closing.updateAndGet(made -> made != null ? made : Mono.defer(() -> {
            maintenance.stop();
            recurring.stop();
            depths.stop();
            return Cleanup.inOrder(Mono.whenDelayError(schedulers.stream().map(QueueScheduler::close).toList()),
                    Mono.whenDelayError(registry.close(), tally.stop(minutes, QueueScheduler.CLOSE_STEP), transport.close(),
                                    limiter.close())
                            .timeout(QueueScheduler.CLOSE_STEP, Mono.fromRunnable(() -> log.warn(
                                    "registry entry, outcome counts, poke transport or limiter not closed within {}", QueueScheduler.CLOSE_STEP))))
                    .doFinally(signal -> transitions.stopPokingThrough(transport));
        }).cache());
    }
}
