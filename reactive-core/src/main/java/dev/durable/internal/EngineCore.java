package dev.durable.internal;

import dev.durable.CallerTransactions;
import dev.durable.Definition;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.RecurringJob;
import dev.durable.WorkflowDefinition;
import dev.durable.admin.DurableAdmin;
import dev.durable.internal.admin.BulkJobs;
import dev.durable.internal.admin.EngineAdmin;
import dev.durable.internal.client.Awaits;
import dev.durable.internal.client.CallerOutcomes;
import dev.durable.internal.client.ClientWarnings;
import dev.durable.internal.client.EnginePermits;
import dev.durable.internal.client.InsertBatcher;
import dev.durable.internal.client.Inserts;
import dev.durable.internal.client.InstanceCalls;
import dev.durable.internal.client.SettleWaiters;
import dev.durable.internal.engine.EngineLifecycle;
import dev.durable.internal.engine.EngineRuntime;
import dev.durable.internal.engine.QueueScheduler;
import dev.durable.internal.engine.Telemetry;
import dev.durable.internal.engine.Transitions;
import dev.durable.internal.engine.WorkerIdentity;
import dev.durable.internal.sql.AdminStatements;
import dev.durable.internal.sql.Migrator;
import dev.durable.internal.sql.ReplaySql;
import dev.durable.internal.sql.Statements;
import dev.durable.internal.sql.Tables;
import dev.durable.limit.EngineLimits;
import dev.durable.observation.TracePropagation;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * An engine's parts, made once from its options and the types it knows, and how they are wired:
 * its connections and statements, the transitions channel, the client's calls (inserts, calls on
 * instances, waits), the lifecycle that starts and closes the running part, replays, the limits
 * outside jobs and the admin. {@code DurableEngine} is the public face over them and delegates every call.
 */
public final class EngineCore {

    private static final Logger log = Loggers.getLogger(EngineCore.class);

    private final EngineOptions options;
    private final Map<String, Definition> definitions;
    private final EngineConnections connections;
    private final Statements statements;
    private final Migrator migrator;
    private final RequestMapper mapper;
    private final Telemetry telemetry;
    private final Transitions transitions;
    private final EngineLifecycle lifecycle;
    private final Inserts inserts;
    private final InstanceCalls instances;
    private final Awaits awaits;
    private final Replays replays;
    private final EngineLimits limits;
    private final DurableAdmin admin;
    private final CallerOutcomes callerOutcomes;

    /** {@code definitions}: the types registered; the engine knows the admin's bulk jobs besides. */
    public EngineCore(EngineOptions options, Map<String, Definition> definitions, List<RecurringJob> recurringJobs,
            CallerTransactions callerTransactions) {
        this.options = options;
        // Every engine knows the admin's bulk jobs, so any engine can start one and whichever runs
        // the bulk queue runs it; a type of the same name registered by the user wins.
        BulkJobs bulkJobs = new BulkJobs();
        Map<String, Definition> known = new LinkedHashMap<>(definitions);
        known.putIfAbsent(DurableAdmin.BULK_TYPE, bulkJobs.definition());
        this.definitions = Map.copyOf(known);
        this.connections = new EngineConnections(options);
        Db db = new Db(connections.factory(), options.callTimeout());
        Map<String, Integer> knownTypes = new LinkedHashMap<>();
        Map<String, Integer> lowestVersions = new LinkedHashMap<>();
        this.definitions.values().forEach(definition -> {
            knownTypes.put(definition.type(), definition.version());
            lowestVersions.put(definition.type(), definition.lowestVersion());
        });
        TracePropagation tracing = options.tracePropagation();
        this.statements = Statements.create(db, options.schema(), options.gates().values(),
                options.rateLimits().values(), options.windows().values(), knownTypes, lowestVersions,
                options.maxInboxSignals(), tracing != TracePropagation.NONE);
        this.migrator = new Migrator(db, options.schema());
        this.mapper = new RequestMapper(this.definitions, options);
        for (Definition definition : this.definitions.values()) {
            if (definition instanceof JobDefinition<?, ?> job) {
                options.codec().prepare(job.argsType());
            } else if (definition instanceof WorkflowDefinition<?> workflow) {
                options.codec().prepare(workflow.stateType());
            }
        }
        this.telemetry = new Telemetry(options.meterRegistry(), options.observationRegistry(),
                options.runObservationConvention(), options.eventBufferSize(), tracing);
        WorkerIdentity identity = WorkerIdentity.create(options.name());
        // The lifecycle's close flushes the insert buffer, which the pipeline made after it: a step
        // read when the close runs.
        Mono<Void> flushInserts = Mono.defer(() -> inserts().drain());
        this.lifecycle = new EngineLifecycle(options.name(), () -> startRuntime(recurringJobs, identity),
                flushInserts, connections.close(QueueScheduler.CLOSE_STEP),
                new ClientWarnings(Flux.defer(() -> statements.registry().live())));
        Mono<Void> whenOpen = lifecycle.whenOpen();
        SettleWaiters waiters = new SettleWaiters(watches -> whenOpen.thenMany(statements.instances().watch(watches)),
                options.settlePollInterval(), options.callTimeout(), Schedulers.parallel());
        this.transitions = new Transitions(telemetry, waiters);
        InsertBatcher.Settings batching = new InsertBatcher.Settings(options.name(), options.insertBatchSize(),
                options.insertBatchDelay(), options.insertBufferCapacity(), Schedulers.parallel());
        this.inserts = new Inserts(mapper, tracing, statements.inserts(),
                statements.policyInserts(), telemetry, transitions,
                lifecycle, callerTransactions, connections.factory(), options.leaseTtl(), whenOpen,
                batching);
        this.instances = new InstanceCalls(statements.instances(), statements.signals(), mapper, options.codec(),
                tracing, telemetry, transitions, options.maxInboxSignals(), whenOpen);
        this.awaits = new Awaits(waiters, statements.instances(), transitions, List.copyOf(options.queues().keySet()),
                instances::withCodec, whenOpen);
        this.replays = new Replays(new ReplaySql(db, new Tables(options.schema())), instances::get, this.definitions,
                options.codec(), mapper::encode, transitions::poke, whenOpen);
        this.callerOutcomes = new CallerOutcomes(statements.outcomes(), mapper, callerTransactions,
                connections.factory(), whenOpen);
        this.limits = new EnginePermits(options.name(), options.gates(), options.rateLimits(), options.windows(),
                options.permitTryConcurrency(), lifecycle::runningLimiter);
        this.admin = new EngineAdmin(new AdminCalls(options, transitions, instances, inserts, replays,
                lifecycle::runningLimiter), AdminStatements.create(db, options.schema()), whenOpen, bulkJobs, replays,
                this.definitions);
    }

    /** Migrates (unless turned off), checks the connections' isolation, then makes and starts the runtime. */
    private Mono<EngineRuntime> startRuntime(List<RecurringJob> recurringJobs, WorkerIdentity identity) {
        Mono<Integer> migrated = options.applyMigrations() ? migrator.migrate() : Mono.just(0);
        return migrated
                .then(connections.warnUnlessReadCommitted(statements.registry()))
                .then(EngineRuntime.start(new EngineRuntime.Wiring(options, connections.factory(), definitions,
                        recurringJobs, statements, identity, mapper, telemetry,
                        inserts::insert, transitions)))
                .doOnSuccess(started -> log.info("Durable engine {} started: schema {}, queues {}",
                        options.name(), options.schema(), options.queues().keySet()));
    }

    /** Empty while the engine is open; an {@code EngineClosedException} once its close was asked for. */
    public Mono<Void> whenOpen() {
        return lifecycle.whenOpen();
    }

    public EngineOptions options() {
        return options;
    }

    public Map<String, Definition> definitions() {
        return definitions;
    }

    public Statements statements() {
        return statements;
    }

    public Migrator migrator() {
        return migrator;
    }

    public RequestMapper mapper() {
        return mapper;
    }

    public Telemetry telemetry() {
        return telemetry;
    }

    public Transitions transitions() {
        return transitions;
    }

    public EngineLifecycle lifecycle() {
        return lifecycle;
    }

    public Inserts inserts() {
        return inserts;
    }

    public InstanceCalls instances() {
        return instances;
    }

    public Awaits awaits() {
        return awaits;
    }

    public Replays replays() {
        return replays;
    }

    public EngineLimits limits() {
        return limits;
    }

    public DurableAdmin admin() {
        return admin;
    }

    public CallerOutcomes callerOutcomes() {
        return callerOutcomes;
    }
}
