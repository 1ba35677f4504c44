package dev.durable;

import dev.durable.admin.DurableAdmin;
import dev.durable.internal.Cleanup;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import dev.durable.internal.ReadCommittedConnections;
import dev.durable.internal.Replays;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.admin.BulkJobs;
import dev.durable.internal.admin.EngineAdmin;
import dev.durable.internal.engine.ClaimOnInsert;
import dev.durable.internal.engine.ClientWarnings;
import dev.durable.internal.engine.EngineRuntime;
import dev.durable.internal.engine.EnginePermits;
import dev.durable.limit.EngineLimits;
import dev.durable.internal.engine.InsertBatcher;
import dev.durable.internal.engine.QueueScheduler;
import dev.durable.internal.engine.Registry;
import dev.durable.internal.engine.SettleWaiters;
import dev.durable.internal.engine.Telemetry;
import dev.durable.internal.engine.WorkerIdentity;
import dev.durable.internal.sql.AdminSql;
import dev.durable.internal.sql.InstanceSql;
import dev.durable.internal.sql.InstanceSql.Inserted;
import dev.durable.internal.sql.InstanceSql.Resolved;
import dev.durable.internal.sql.InstanceSql.Placed;
import dev.durable.internal.sql.Migrator;
import dev.durable.internal.sql.ReplaySql;
import dev.durable.internal.sql.Rows.CancelRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.internal.sql.Statements;
import dev.durable.internal.sql.Tables;
import dev.durable.observation.TracePropagation;
import dev.durable.internal.sql.VersionSql;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * A Durable engine: the client that inserts, queries and cancels instances, and, once
 * {@linkplain #start() started}, the schedulers that run the queues it is configured with.
 *
 * <pre>{@code
 * DurableEngine engine = DurableEngine.builder(EngineOptions.builder()
 *                 .url("r2dbc:postgresql://app@db/app").queue("default").build())
 *         .register(JobDefinition.of("greet", String.class, name -> Mono.just("hello " + name)))
 *         .build();
 * engine.start().block();
 * long id = engine.insert(JobRequest.of("greet", "world")).block();
 * }</pre>
 *
 * Every method returns at once with a {@code Mono} or {@code Flux}; nothing blocks the caller.
 */
public final class DurableEngine implements AutoCloseable {

    private static final Logger log = Loggers.getLogger(DurableEngine.class);
    /** Rows failed per statement by {@link #failUnrunnable}: short transactions, however many rows. */
    private static final int FAIL_BATCH = 1000;

    /**
     * Where the engine is in its life, swapped as one value: the start in flight or done (null
     * before the first start, and again after a failed one), the parts it made (null until a start
     * succeeds), and the close once asked for.
     */
    private record Lifecycle(@Nullable Mono<Void> starting, @Nullable EngineRuntime runtime,
            @Nullable Mono<Void> closing) {

        static final Lifecycle NEW = new Lifecycle(null, null, null);

        Lifecycle starting(@Nullable Mono<Void> start) {
            return new Lifecycle(start, runtime, closing);
        }

        Lifecycle running(EngineRuntime started) {
            return new Lifecycle(starting, started, closing);
        }

        Lifecycle closing(Mono<Void> close) {
            return new Lifecycle(starting, runtime, close);
        }
    }

    private final EngineOptions options;
    private final Map<String, Definition> definitions;
    private final List<RecurringJob> recurringJobs;
    private final @Nullable ConnectionPool ownPool;
    private final ConnectionFactory connectionFactory;
    private final Statements statements;
    private final Migrator migrator;
    private final WorkerIdentity identity;
    private final RequestMapper mapper;
    private final SettleWaiters waiters;
    private final InsertBatcher batcher;
    private final Telemetry telemetry;
    /** How callers' trace contexts are captured; NONE: never read. */
    private final TracePropagation tracing;
    private final ClientWarnings clientWarnings;
    private final CallerTransactions callerTransactions;
    private final DurableAdmin admin;
    private final Replays replays;
    private final EngineLimits limits;
    private final AtomicReference<Lifecycle> lifecycle = new AtomicReference<>(Lifecycle.NEW);

    private DurableEngine(EngineOptions options, Map<String, Definition> definitions, List<RecurringJob> recurringJobs,
            CallerTransactions callerTransactions) {
        this.options = options;
        this.callerTransactions = callerTransactions;
        // Every engine knows the admin's bulk jobs, so any engine can start one and whichever runs
        // the bulk queue runs it; a type of the same name registered by the user wins.
        BulkJobs bulkJobs = new BulkJobs();
        Map<String, Definition> known = new LinkedHashMap<>(definitions);
        known.putIfAbsent(DurableAdmin.BULK_TYPE, bulkJobs.definition());
        this.definitions = Map.copyOf(known);
        if (options.connectionFactory() != null) {
            this.ownPool = null;
            this.connectionFactory = options.connectionFactory();
        } else {
            ConnectionFactory target;
            try {
                // The server cuts a statement that runs past the bound; the pool never waits past its own.
                target = ConnectionFactories.get(ConnectionFactoryOptions.parse(options.url()).mutate()
                        .option(ConnectionFactoryOptions.STATEMENT_TIMEOUT, options.statementTimeout())
                        .build());
            } catch (RuntimeException unusable) {
                // The driver's message quotes the whole URL, password included: mask it, drop the cause.
                throw new IllegalArgumentException("url is not a usable R2DBC URL: "
                        + Urls.maskedIn(unusable.getMessage(), options.url()));
            }
            this.ownPool = new ConnectionPool(ConnectionPoolConfiguration.builder(new ReadCommittedConnections(target))
                    .name("durable-" + options.name())
                    .initialSize(1)
                    .maxSize(options.poolMaxSize())
                    .maxIdleTime(Duration.ofMinutes(5))
                    .maxAcquireTime(options.acquireTimeout())
                    .maxCreateConnectionTime(options.acquireTimeout())
                    .maxValidationTime(options.acquireTimeout())
                    .build());
            this.connectionFactory = ownPool;
        }
        Db db = new Db(connectionFactory, options.callTimeout());
        this.recurringJobs = recurringJobs;
        Map<String, Integer> knownTypes = new LinkedHashMap<>();
        Map<String, Integer> lowestVersions = new LinkedHashMap<>();
        this.definitions.values().forEach(definition -> {
            knownTypes.put(definition.type(), definition.version());
            lowestVersions.put(definition.type(), definition.lowestVersion());
        });
        this.tracing = options.tracePropagation();
        this.statements = Statements.create(db, options.schema(), options.gates().values(),
                options.rateLimits().values(), options.windows().values(), knownTypes, lowestVersions,
                options.maxInboxSignals(), tracing != TracePropagation.NONE);
        this.migrator = new Migrator(db, options.schema());
        this.limits = new EnginePermits(options.name(), options.gates(), options.rateLimits(), options.windows(),
                options.permitTryConcurrency(), () -> {
            EngineRuntime running = runtime();
            return running == null ? null : running.limiter();
        });
        this.mapper = new RequestMapper(this.definitions, options);
        this.replays = new Replays(new ReplaySql(db, new Tables(options.schema())), this::get, this.definitions,
                options.codec(), mapper::encode, this::poke);
        this.admin = new EngineAdmin(this, new AdminSql(db, new Tables(options.schema()), options.schema()),
                whenOpen(), bulkJobs, replays, new VersionSql(db, new Tables(options.schema())), this.definitions,
                () -> {
                    EngineRuntime running = runtime();
                    return running == null ? null : running.limiter();
                });
        this.identity = WorkerIdentity.create(options.name());
        for (Definition definition : this.definitions.values()) {
            if (definition instanceof JobDefinition<?, ?> job) {
                options.codec().prepare(job.argsType());
            } else if (definition instanceof WorkflowDefinition<?> workflow) {
                options.codec().prepare(workflow.stateType());
            }
        }
        this.telemetry = new Telemetry(options.meterRegistry(), options.observationRegistry(),
                options.runObservationConvention(), options.eventBufferSize(), tracing);
        this.waiters = new SettleWaiters(watches -> whenOpen().thenMany(statements.instances().watch(watches)),
                options.settlePollInterval(), options.callTimeout(), Schedulers.parallel());
        this.clientWarnings = new ClientWarnings(Flux.defer(() -> statements.registry().live()));
        this.batcher = new InsertBatcher(options.name(), this::insertRows, options.insertBatchSize(),
                options.insertBatchDelay(), options.insertBufferCapacity(), Schedulers.parallel());
    }

    public static Builder builder(EngineOptions options) {
        return new Builder(options);
    }

    public EngineOptions options() {
        return options;
    }

    public JsonCodec codec() {
        return options.codec();
    }

    /** Applies the migrations (unless turned off), then starts the configured queues. Idempotent. */
    public Mono<Void> start() {
        for (;;) {
            Lifecycle now = lifecycle.get();
            if (now.closing() != null) {
                return Mono.error(new EngineClosedException(options.name()));
            }
            if (now.starting() != null) {
                return now.starting();
            }
            // A failed start (the database down at boot, say) has undone what it began and is
            // forgotten, so a later start() tries again from scratch instead of replaying the failure.
            AtomicReference<Mono<Void>> self = new AtomicReference<>();
            Mono<Void> starting = Mono.defer(this::doStart)
                    .doOnError(error -> lifecycle.getAndUpdate(state -> state.starting() == self.get()
                            ? state.starting(null) : state))
                    .cache();
            self.set(starting);
            if (lifecycle.compareAndSet(now, now.starting(starting))) {
                return starting;
            }
        }
    }

    private Mono<Void> doStart() {
        Mono<Integer> migrated = options.applyMigrations() ? migrator.migrate() : Mono.just(0);
        return migrated
                .then(warnUnlessReadCommitted())
                .then(EngineRuntime.start(new EngineRuntime.Wiring(options, connectionFactory, definitions,
                        recurringJobs, statements, identity, mapper, telemetry, this::insert, this::afterTransition)))
                .flatMap(runtime -> {
                    Lifecycle now = lifecycle.updateAndGet(state -> state.running(runtime));
                    // A close that stopped waiting for this start may have missed the runtime: close it here.
                    return now.closing() == null ? Mono.<Void>empty()
                            : runtime.close().then(Mono.error(new EngineClosedException(options.name())));
                })
                .doOnSuccess(started -> log.info("Durable engine {} started: schema {}, queues {}",
                        options.name(), options.schema(), options.queues().keySet()));
    }

    /**
     * The engine's statements are written for READ COMMITTED: its own pool is set to it
     * ({@link ReadCommittedConnections}); a connection factory given to it is asked once, and a
     * warning says what to set when it defaults to another level.
     */
    private Mono<Void> warnUnlessReadCommitted() {
        if (ownPool != null) {
            return Mono.empty();
        }
        return statements.registry().defaultIsolation().doOnNext(isolation -> {
            if (!"read committed".equals(isolation)) {
                log.warn("Durable engine {}: its connections start transactions in {}, not read committed;"
                        + " the engine's statements are written for read committed (a key election may then"
                        + " miss a row until the key healer's next pass, an update may fail a serialization"
                        + " check and go again). Set default_transaction_isolation on the connection"
                        + " factory given to the engine.", options.name(), isolation);
            }
        }).then();
    }

    private @Nullable EngineRuntime runtime() {
        return lifecycle.get().runtime();
    }

    /**
     * A row changed status here: one that became runnable (retry, reaper, woken parent) may be
     * wanted by its queue's schedulers; one that settled or parked releases its local waiters.
     */
    private void afterTransition(Transition transition) {
        if (transition.status() == InstanceStatus.RUNNABLE) {
            poke(transition.queue());
        }
        waiters.changed(transition.id(), transition.status());
    }

    /** Tells the schedulers of {@code queue} that work is there (after a transactional insert, say). */
    public void poke(String queue) {
        EngineRuntime runtime = runtime();
        if (runtime != null) {
            runtime.poke(queue);
        }
    }

    // ---- Client API -------------------------------------------------------------------------

    /** Inserts one instance; emits its id, or a typed error naming what was wrong. */
    public Mono<Long> insert(JobRequest request) {
        if (request == null) {
            return Mono.error(new InvalidRequestException("request must not be null"));
        }
        return insertAll(List.of(request)).map(ids -> ids.get(0));
    }

    /**
     * Inserts many instances in one round trip; emits their ids in request order. Inside a caller's
     * transaction (see {@link Builder#joinTransactions}) the insert joins it. A request with a
     * {@link ConflictPolicy} other than reject is answered by the id that carries it (the holder it
     * skipped or changed, or the follow-up's id): {@link #insertWithResult} and
     * {@link #insertAll(List, InsertMode)} also say which.
     */
    public Mono<List<Long>> insertAll(List<JobRequest> requests) {
        return whenOpen().then(rows(requests))
                .flatMap(rows -> rows.stream().anyMatch(NewInstance::hasPolicy)
                        ? insertWithPolicies(rows).map(DurableEngine::ids)
                        : joined().flatMap(transaction -> insertJoined(transaction, rows))
                                .switchIfEmpty(Mono.defer(() -> insertRows(rows))));
    }

    /**
     * Inserts one instance under its {@link JobRequest#onConflict conflict policy} and says what
     * became of it: inserted, or, when a live instance held its correlation key, skipped, replaced
     * or queued as the holder's follow-up ({@link InsertResult.Disposition}). One statement, also
     * inside a caller's transaction (see {@link Builder#joinTransactions}).
     */
    public Mono<InsertResult> insertWithResult(JobRequest request) {
        if (request == null) {
            return Mono.error(new InvalidRequestException("request must not be null"));
        }
        return insertAll(List.of(request), InsertMode.REJECT_DUPLICATES).map(results -> results.get(0));
    }

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

    /** The subscriber's trace context, when tracing is configured (empty without, or when it has none). */
    private Mono<Optional<String>> callerTrace() {
        return tracing == TracePropagation.NONE ? NO_TRACE
                : Mono.deferContextual(context -> Mono.just(Optional.ofNullable(tracing.capture(context))));
    }

    private static final Mono<Optional<String>> NO_TRACE = Mono.just(Optional.empty());

    private static List<Long> ids(List<InsertResult> results) {
        return results.stream().map(InsertResult::id).toList();
    }

    /** The caller's transaction to join, from the subscriber's context; empty when none. */
    private Mono<CallerTransactions.Joined> joined() {
        return callerTransactions == CallerTransactions.NONE ? Mono.empty()
                : Mono.defer(() -> callerTransactions.current(connectionFactory));
    }

    /**
     * Inserts on the caller's transaction: the rows exist once it commits, and their queues are
     * poked then (a poke before the commit would find nothing and leave them to the next poll).
     */
    private Mono<List<Long>> insertJoined(CallerTransactions.Joined transaction, List<NewInstance> rows) {
        return statements.instances().insert(transaction.connection(), ClaimOnInsert.none(rows).insertions(), 0)
                .collectList()
                .flatMap(inserted -> {
                    List<Long> ids = inserted.stream().map(Inserted::id).toList();
                    telemetry.inserted(rows, ids);
                    Set<String> queues = queuesToPoke(rows, inserted);
                    if (!queues.isEmpty()) {
                        transaction.afterCommit(() -> queues.forEach(this::poke));
                    }
                    return warnIfUnserved(rows).thenReturn(ids);
                });
    }

    /**
     * Inserts many instances in one round trip. With {@link InsertMode#SKIP_DUPLICATES}, a request
     * whose correlation key is held by a live instance (or by an earlier request of the batch) is
     * skipped, and its result names the holder; with {@link InsertMode#REJECT_DUPLICATES} (as
     * {@link #insertAll(List)}) one such key fails the whole batch and nothing is inserted. A
     * request's own {@link JobRequest#onConflict conflict policy} overrides the mode; a batch with a
     * replace or debounce in it goes in one upsert statement (each key once per batch, also inside a
     * caller's transaction). Results come in request order.
     */
    public Mono<List<InsertResult>> insertAll(List<JobRequest> requests, InsertMode mode) {
        if (mode == null) {
            return Mono.error(new InvalidRequestException("mode must not be null"));
        }
        if (mode == InsertMode.REJECT_DUPLICATES) {
            return whenOpen().then(rows(requests))
                    .flatMap(rows -> rows.stream().anyMatch(NewInstance::hasPolicy) ? insertWithPolicies(rows)
                            : joined().flatMap(transaction -> insertJoined(transaction, rows))
                                    .switchIfEmpty(Mono.defer(() -> insertRows(rows)))
                                    .map(ids -> ids.stream().map(id -> new InsertResult(id, true)).toList()));
        }
        // It may run its statement again (a deadlock, a holder it could not name): not inside a
        // caller's transaction, which one failed statement aborts. Saying so beats not joining.
        return whenOpen().then(rows(requests))
                .flatMap(rows -> rows.stream().anyMatch(NewInstance::changesHolder)
                        // The mode makes each request without a policy of its own skip a live key.
                        ? insertWithPolicies(rows.stream().map(row -> row.hasPolicy() ? row
                                : row.withOnConflict(ConflictPolicy.skip())).toList())
                        : joined().hasElement().flatMap(inTransaction -> inTransaction
                        ? Mono.error(new InvalidRequestException("insertAll with SKIP_DUPLICATES does not join a"
                                + " caller's transaction: inside one, use insertAll(requests) (a live key fails it)"))
                        : insertSkippingDuplicates(rows, true, 1)));
    }

    /**
     * Inserts one instance with others into one round trip: the request is checked at once (a broken
     * one fails alone, before it is buffered), then waits in a bounded in-memory buffer that is
     * flushed by size ({@link EngineOptions#insertBatchSize()}) or delay
     * ({@link EngineOptions#insertBatchDelay()}). Emits the id once its flush has committed. When
     * the buffer is full the request is inserted on its own at once: none is dropped and the caller
     * never waits for room. {@link #closeLater()} flushes what is buffered before the pool goes.
     */
    public Mono<Long> insertAsync(JobRequest request) {
        if (request == null) {
            return Mono.error(new InvalidRequestException("request must not be null"));
        }
        return whenOpen()
                .then(rows(Collections.singletonList(request)).map(rows -> rows.get(0)))
                // Inside a caller's transaction there is nothing to share: it goes in with that.
                // A request under a conflict policy goes in its own statement, not with the buffer's.
                .flatMap(row -> row.hasPolicy() ? insertWithPolicies(List.of(row)).map(results -> results.get(0).id())
                        : joined().flatMap(transaction -> insertJoined(transaction, List.of(row)))
                                .map(ids -> ids.get(0))
                                .switchIfEmpty(Mono.defer(() -> batcher.insert(row))));
    }

    /**
     * Inserts checked rows in one round trip, claimed by idle local schedulers where they can take
     * them; pokes the queues of the rows due now that no scheduler took.
     */
    private Mono<List<Long>> insertRows(List<NewInstance> rows) {
        ClaimOnInsert.Plan plan = claimPlan(rows);
        Mono<List<Long>> insert = ordered(statements.instances().insert(plan.insertions(), options.leaseTtl().toMillis())
                .collectList()
                // Keyed rows elect their key's head under a lock per key (the schema's "Key election"):
                // a batch over keys A and B can deadlock with a commit settling B's and A's heads. The
                // loser was rolled back whole, so it goes again.
                .retryWhen(afterDeadlock())
                .doOnError(error -> plan.cancel())
                .map(inserted -> {
                    List<Long> ids = inserted.stream().map(Inserted::id).toList();
                    // INSERTED before the hand-over: a claimed row's PICKED must not come first.
                    telemetry.inserted(rows, ids);
                    plan.handOver(inserted);
                    queuesToPoke(rows, inserted).forEach(this::poke);
                    return ids;
                })
                .flatMap(ids -> warnIfUnserved(rows).thenReturn(ids)));
        return detachedIfClaiming(plan, insert);
    }

    /** The insert under an event-order ticket ({@code Telemetry#insertStarting}), taken as it is sent. */
    private <T> Mono<T> ordered(Mono<T> insert) {
        return Mono.defer(() -> {
            long ticket = telemetry.insertStarting();
            return insert.doFinally(signal -> telemetry.insertEnded(ticket));
        });
    }

    /**
     * Warns about inserts into queues no live engine serves: a started engine knows the fleet; an
     * engine that runs nothing asks the registry, at most once a minute per queue, before the
     * insert answers (a failed read only skips the warning).
     */
    private Mono<Void> warnIfUnserved(List<NewInstance> rows) {
        List<String> queues = rows.stream().map(NewInstance::queue).distinct().toList();
        EngineRuntime runtime = runtime();
        if (runtime != null) {
            runtime.registry().warnIfUnserved(queues);
            return Mono.empty();
        }
        return clientWarnings.inserted(queues);
    }

    /** Claims for the idle local schedulers, none while the engine is not running. */
    private ClaimOnInsert.Plan claimPlan(List<NewInstance> rows) {
        Lifecycle now = lifecycle.get();
        return now.runtime() == null || now.closing() != null ? ClaimOnInsert.none(rows)
                : now.runtime().claims().plan(rows);
    }

    /**
     * Rows inserted claimed must reach their scheduler whatever the caller does: a caller that
     * cancels (a timeout, a client gone) must not strand the reservation or the rows.
     */
    private static <T> Mono<T> detachedIfClaiming(ClaimOnInsert.Plan plan, Mono<T> insert) {
        if (!plan.claimsAny()) {
            return insert;
        }
        Mono<T> detached = insert.cache();
        detached.subscribe(null, error -> log.debug("insert with claims failed: {}", error.toString()));
        return detached;
    }

    /**
     * The skip-duplicates insert ({@code InstanceSql.insertSkippingDuplicates}). A request whose key
     * holder committed after the statement's snapshot comes back unnamed; those requests go again in
     * a new statement, which sees the holder (or finds the key free and inserts), a bounded number
     * of times. A deadlock with another batch rolled the statement back whole: it goes again too.
     */
    private Mono<List<InsertResult>> insertSkippingDuplicates(List<NewInstance> rows, boolean claim, int attempt) {
        ClaimOnInsert.Plan plan = claim ? claimPlan(rows) : ClaimOnInsert.none(rows);
        Mono<List<InsertResult>> insert = ordered(statements.instances()
                .insertSkippingDuplicates(plan.insertions(), options.leaseTtl().toMillis())
                .collectList()
                .retryWhen(afterDeadlock())
                .doOnError(error -> plan.cancel())
                .flatMap(placed -> {
                    List<Inserted> inserted = new ArrayList<>();
                    List<NewInstance> insertedRows = new ArrayList<>();
                    List<Integer> unnamed = new ArrayList<>();
                    List<@Nullable InsertResult> results = new ArrayList<>(rows.size());
                    for (int i = 0; i < placed.size(); i++) {
                        Placed place = placed.get(i);
                        if (place.inserted() != null) {
                            inserted.add(place.inserted());
                            insertedRows.add(rows.get(i));
                            results.add(new InsertResult(place.inserted().id(), true));
                        } else if (place.heldBy() != null) {
                            results.add(new InsertResult(place.heldBy(), false));
                        } else {
                            unnamed.add(i);
                            results.add(null);
                        }
                    }
                    telemetry.inserted(insertedRows, inserted.stream().map(Inserted::id).toList());
                    plan.handOver(inserted);
                    queuesToPoke(insertedRows, inserted).forEach(this::poke);
                    Mono<Void> warned = insertedRows.isEmpty() ? Mono.empty() : warnIfUnserved(insertedRows);
                    if (unnamed.isEmpty()) {
                        return warned.then(Mono.fromSupplier(() -> List.<InsertResult>copyOf(results)));
                    }
                    List<NewInstance> again = unnamed.stream().map(rows::get).toList();
                    if (attempt >= INSERT_ATTEMPTS) {
                        return Mono.error(new DuplicateCorrelationKeyException(again.get(0).correlationKey(),
                                new IllegalStateException("the live holder of the key changed under each of "
                                        + INSERT_ATTEMPTS + " attempts to name it")));
                    }
                    return insertSkippingDuplicates(again, false, attempt + 1).map(later -> {
                        for (int j = 0; j < unnamed.size(); j++) {
                            results.set(unnamed.get(j), later.get(j));
                        }
                        return List.<InsertResult>copyOf(results);
                    });
                }));
        return detachedIfClaiming(plan, insert);
    }

    /**
     * Inserts rows under their conflict policies in one statement ({@code InstanceSql.insertWithPolicies}),
     * on the caller's transaction when one is joined. Each holder is found and changed in the
     * statement itself, so nothing is asked again; only a deadlock between two such batches (their
     * keys taken in two upserts) sends a batch again, outside a caller's transaction.
     */
    private Mono<List<InsertResult>> insertWithPolicies(List<NewInstance> rows) {
        try {
            RequestMapper.checkRepeatedKeys(rows);
        } catch (InvalidRequestException invalid) {
            return Mono.error(invalid);
        }
        return joined().flatMap(transaction -> statements.instances()
                        .insertWithPolicies(transaction.connection(), ClaimOnInsert.none(rows).insertions(), 0)
                        .collectList()
                        .map(resolved -> placed(rows, resolved, null, queues -> transaction.afterCommit(
                                () -> queues.forEach(this::poke))))
                        .flatMap(results -> warnIfUnserved(rows).thenReturn(results)))
                .switchIfEmpty(Mono.defer(() -> {
                    ClaimOnInsert.Plan plan = claimPlan(rows);
                    Mono<List<InsertResult>> insert = ordered(statements.instances()
                            .insertWithPolicies(plan.insertions(), options.leaseTtl().toMillis())
                            .collectList()
                            .retryWhen(afterDeadlock())
                            .doOnError(error -> plan.cancel())
                            .map(resolved -> placed(rows, resolved, plan, queues -> queues.forEach(this::poke)))
                            .flatMap(results -> warnIfUnserved(rows).thenReturn(results)));
                    return detachedIfClaiming(plan, insert);
                }));
    }

    /**
     * The answers of a policy insert; hands claimed rows to their schedulers and pokes the queues of
     * rows due now that none took: new ones, and holders a replace made due.
     */
    private List<InsertResult> placed(List<NewInstance> rows, List<Resolved> resolved,
            ClaimOnInsert.@Nullable Plan plan, java.util.function.Consumer<Set<String>> poke) {
        List<Inserted> inserted = new ArrayList<>();
        List<NewInstance> insertedRows = new ArrayList<>();
        Set<String> queues = new LinkedHashSet<>();
        List<InsertResult> results = new ArrayList<>(rows.size());
        for (int i = 0; i < resolved.size(); i++) {
            Resolved place = resolved.get(i);
            results.add(new InsertResult(place.id(), switch (place.placement()) {
                case INSERTED -> InsertResult.Disposition.INSERTED;
                case SKIPPED -> InsertResult.Disposition.SKIPPED;
                case REPLACED -> InsertResult.Disposition.REPLACED;
                case FOLLOW_UP -> InsertResult.Disposition.FOLLOW_UP;
            }));
            if (place.inserted() != null) {
                inserted.add(place.inserted());
                insertedRows.add(rows.get(i));
            } else if (place.placement() == InstanceSql.Placement.REPLACED && place.due()) {
                queues.add(rows.get(i).queue());
            }
        }
        telemetry.inserted(insertedRows, inserted.stream().map(Inserted::id).toList());
        if (plan != null) {
            plan.handOver(inserted);
        }
        queues.addAll(queuesToPoke(insertedRows, inserted));
        if (!queues.isEmpty()) {
            poke.accept(queues);
        }
        return List.copyOf(results);
    }

    /** How often an insert goes again (a deadlock, an unnamed holder) before it gives up. */
    private static final int INSERT_ATTEMPTS = 3;

    /**
     * An insert of the engine's own transaction that lost a deadlock goes again, after a short random
     * pause so the two do not meet again in step; the last failure is the caller's typed error.
     */
    private static Retry afterDeadlock() {
        return Retry.backoff(INSERT_ATTEMPTS, Duration.ofMillis(5)).jitter(0.75).filter(Errors::isDeadlock)
                .onRetryExhaustedThrow((spec, signal) -> signal.failure());
    }

    /** The queues of inserted rows due now (by the database clock) that no local scheduler claimed. */
    private static Set<String> queuesToPoke(List<NewInstance> rows, List<Inserted> inserted) {
        Set<String> queues = new LinkedHashSet<>();
        for (int i = 0; i < rows.size(); i++) {
            if (inserted.get(i).due() && inserted.get(i).claim() == null) {
                queues.add(rows.get(i).queue());
            }
        }
        return queues;
    }

    /**
     * Inserts one instance on the caller's connection, inside the transaction it has open: the job
     * exists if and only if the caller's transaction commits.
     */
    public Mono<Long> insert(Connection connection, JobRequest request) {
        if (request == null) {
            return Mono.error(new InvalidRequestException("request must not be null"));
        }
        return insertAll(connection, List.of(request)).map(ids -> ids.get(0));
    }

    /** Inserts many instances on the caller's connection, inside its open transaction. */
    public Mono<List<Long>> insertAll(Connection connection, List<JobRequest> requests) {
        if (connection == null) {
            return Mono.error(new InvalidRequestException("connection must not be null"));
        }
        return whenOpen().then(rows(requests))
                .flatMap(rows -> rows.stream().anyMatch(NewInstance::hasPolicy) ? insertWithPolicies(connection, rows)
                        : statements.instances().insert(connection, ClaimOnInsert.none(rows).insertions(), 0)
                        .collectList()
                        .flatMap(inserted -> {
                            List<Long> ids = inserted.stream().map(Inserted::id).toList();
                            EngineRuntime runtime = runtime();
                            if (runtime == null) {
                                return warnIfUnserved(rows).thenReturn(ids);
                            }
                            runtime.registry().warnIfUnserved(rows.stream().map(NewInstance::queue).distinct().toList());
                            return Flux.fromIterable(queuesToPoke(rows, inserted))
                                    .concatMap(queue -> runtime.transport().pokeOnCommit(connection, queue))
                                    .then(Mono.just(ids));
                        }));
    }

    /** A policy insert on the caller's connection: its queues are poked when that transaction commits. */
    private Mono<List<Long>> insertWithPolicies(Connection connection, List<NewInstance> rows) {
        RequestMapper.checkRepeatedKeys(rows);
        return statements.instances().insertWithPolicies(connection, ClaimOnInsert.none(rows).insertions(), 0)
                .collectList()
                .flatMap(resolved -> {
                    Set<String> queues = new LinkedHashSet<>();
                    List<Long> ids = ids(placed(rows, resolved, null, queues::addAll));
                    EngineRuntime runtime = runtime();
                    if (runtime == null) {
                        return warnIfUnserved(rows).thenReturn(ids);
                    }
                    runtime.registry().warnIfUnserved(rows.stream().map(NewInstance::queue).distinct().toList());
                    return Flux.fromIterable(queues)
                            .concatMap(queue -> runtime.transport().pokeOnCommit(connection, queue))
                            .then(Mono.just(ids));
                });
    }

    /** The instance with that id, or empty. */
    public Mono<Instance> get(long id) {
        return whenOpen().then(statements.instances().get(id)).map(this::withCodec);
    }

    /** Instances handed out decode their state and result through this engine's codec. */
    private Instance withCodec(Instance instance) {
        return instance.withCodec(options.codec());
    }

    /** Empty while the engine is open; an {@link EngineClosedException} once closeLater() or close() was called. */
    private Mono<Void> whenOpen() {
        return Mono.defer(() -> lifecycle.get().closing() == null ? Mono.empty()
                : Mono.error(new EngineClosedException(options.name())));
    }

    /**
     * Instances by queue and status (either may be null for any), in id order, starting after
     * {@code afterId} (0 from the start), at most {@code limit}.
     */
    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        if (limit < 1) {
            return Flux.error(new InvalidRequestException("limit must be at least 1, was " + limit));
        }
        if (queue != null) {
            try {
                QueueNames.check("queue", queue);
            } catch (InvalidRequestException invalid) {
                return Flux.error(invalid);
            }
        }
        return whenOpen().thenMany(statements.instances().list(queue, status, afterId, limit)).map(this::withCodec);
    }

    /**
     * Cancels an instance: at once when it is runnable or parked; when it is executing, at its next
     * commit (its outcome is discarded). Its children are left alone.
     */
    public Mono<CancelResult> cancel(long id) {
        return cancel(id, false);
    }

    /**
     * Cancels an instance and, with {@code cascade}, every live descendant (children, their
     * children...), each at once or at its next commit as above. Says what became of the instance.
     */
    public Mono<CancelResult> cancel(long id, boolean cascade) {
        return whenOpen().then(statements.instances().cancel(id, cascade))
                .doOnNext(row -> {
                    if (row.after() == InstanceStatus.CANCELLED) {
                        telemetry.cancelled(id, row.type(), row.queue());
                        waiters.changed(id, InstanceStatus.CANCELLED);
                    }
                })
                .map(DurableEngine::cancelResult)
                .defaultIfEmpty(CancelResult.NOT_FOUND);
    }

    /**
     * Delivers a signal to the live instance {@code id}: stored in its inbox and, when the instance
     * awaits {@code name}, wakes it. A repeated {@code dedupKey} is a no-op ({@link SignalResult#DUPLICATE}).
     * No live instance with that id is a {@link NoTargetException}.
     */
    public Mono<SignalResult> signal(long id, String name, @Nullable Object payload, @Nullable String dedupKey) {
        return deliver(id, null, name, payload, dedupKey, "with id " + id);
    }

    /** As {@link #signal(long, String, Object, String)}, addressed by the instance's live correlation key. */
    public Mono<SignalResult> signal(String correlationKey, String name, @Nullable Object payload,
            @Nullable String dedupKey) {
        return deliver(null, correlationKey, name, payload, dedupKey, "with correlation key '" + correlationKey + "'");
    }

    private Mono<SignalResult> deliver(@Nullable Long id, @Nullable String correlationKey, String name,
            @Nullable Object payload, @Nullable String dedupKey, String target) {
        return whenOpen().then(Mono.fromCallable(() -> {
                    RequestMapper.checkName("signal name", name);
                    if (name.contains(",")) {
                        throw new InvalidRequestException("signal name must not contain ',', was '" + name + "'");
                    }
                    if (correlationKey != null) {
                        RequestMapper.checkKey("correlationKey", correlationKey);
                    }
                    if (dedupKey != null) {
                        RequestMapper.checkKey("dedupKey", dedupKey);
                    }
                    return Optional.ofNullable(payload == null ? null : mapper.encode("signal payload", payload));
                }))
                .flatMap(json -> callerTrace()
                        .flatMap(trace -> ordered(statements.signals().deliver(id, correlationKey, name,
                                json.orElse(null), dedupKey, trace.orElse(null)).map(delivery -> {
                            // Said inside the ticket, so a pick of the woken instance comes after.
                            if (delivery.stored() && !delivery.inboxFull()) {
                                telemetry.signalled(delivery.id(), delivery.type(), delivery.queue(), delivery.woken());
                            }
                            return delivery;
                        }))))
                .switchIfEmpty(Mono.error(() -> new NoTargetException(target)))
                .flatMap(delivery -> delivery.inboxFull()
                        ? Mono.error(new InboxFullException(delivery.id(), options.maxInboxSignals()))
                        : Mono.just(delivery))
                .map(delivery -> {
                    if (delivery.woken()) {
                        poke(delivery.queue());
                        waiters.changed(delivery.id(), InstanceStatus.RUNNABLE);
                    }
                    return delivery.stored() ? SignalResult.DELIVERED : SignalResult.DUPLICATE;
                });
    }

    /**
     * Completes when none of this engine's queues has an instance due now or running (future runs,
     * parked instances and other queues do not count), or with a {@link DurableTimeoutException}
     * after {@code timeout}. Pokes the queues first, then reads the count every 20 ms. For tests
     * and for draining work in a controlled shutdown.
     */
    public Mono<Void> awaitIdle(Duration timeout) {
        return awaitIdle(timeout, Duration.ZERO);
    }

    /**
     * As {@link #awaitIdle(Duration)}, counting as busy also the instances that become due within
     * {@code horizon}: a retry after a short backoff, say, which a test's drain should wait for.
     */
    public Mono<Void> awaitIdle(Duration timeout, Duration horizon) {
        if (horizon == null || horizon.isNegative()) {
            return Mono.error(new InvalidRequestException("horizon must not be negative, was " + horizon));
        }
        long horizonMillis = horizon.toMillis();
        List<String> queues = List.copyOf(options.queues().keySet());
        if (queues.isEmpty()) {
            return Mono.empty();
        }
        return Mono.fromRunnable(() -> queues.forEach(this::poke))
                .then(Flux.interval(Duration.ZERO, Duration.ofMillis(20))
                        .onBackpressureDrop()
                        .concatMap(tick -> statements.instances().countBusy(queues, horizonMillis), 0)
                        .filter(busy -> busy == 0)
                        .next()
                        .then())
                .timeout(timeout, Mono.error(() -> new DurableTimeoutException(
                        "queues " + queues + " still had due or running work after " + timeout)));
    }

    /**
     * Completes with the instance once it has settled (done, failed or cancelled); with a
     * {@link NoTargetException} when no instance has that id; after {@code timeout}, with a
     * {@link DurableTimeoutException} carrying the last snapshot the wait read
     * ({@link DurableTimeoutException#lastSeen()}). Transitions made by this engine answer at once;
     * others are found by one read shared by every waiter of the engine, every
     * {@link EngineOptions#settlePollInterval()}: a thousand waiters cost one statement a tick.
     */
    public Mono<Instance> awaitSettled(long id, Duration timeout) {
        return awaitStatus(id, timeout, InstanceStatus::isTerminal);
    }

    /**
     * As {@link #awaitSettled}, but after {@code timeout} completes with the instance as it stands
     * then (read afresh, in the shared read), settled or not: check {@code status()}.
     */
    public Mono<Instance> awaitSettledOrCurrent(long id, Duration timeout) {
        return awaitSettled(id, timeout).onErrorResume(DurableTimeoutException.class, late -> whenOpen()
                .then(waiters.current(id))
                .map(this::withCodec)
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to await"))));
    }

    /** As {@link #awaitSettled}, also completing when the instance parks (awaits a signal or children). */
    public Mono<Instance> awaitSettledOrParked(long id, Duration timeout) {
        return awaitStatus(id, timeout, status -> status.isTerminal() || status.isParked());
    }

    private Mono<Instance> awaitStatus(long id, Duration timeout, Predicate<InstanceStatus> wanted) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            return Mono.error(new InvalidRequestException("timeout must be positive, was " + timeout));
        }
        return whenOpen().then(waiters.await(id, wanted, timeout)).map(this::withCodec)
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to await")));
    }

    private static CancelResult cancelResult(CancelRow row) {
        if (row.after() == null) {
            return CancelResult.ALREADY_SETTLED;
        }
        return row.after() == InstanceStatus.CANCELLED ? CancelResult.CANCELLED : CancelResult.REQUESTED;
    }

    /**
     * Applies pending migrations without starting anything (for tools and tests); emits the schema's
     * version after. A schema migrated by a newer Durable, or by another history of its migrations,
     * is refused with {@link SchemaVersionException}, as {@link #start()} refuses it.
     */
    public Mono<Integer> migrate() {
        return migrator.migrate();
    }

    /**
     * Undoes the migrations above version {@code target}, newest first; {@code 0} removes every table
     * of Durable's schema, with its rows (tests, uninstall). Refused as {@link #migrate()} is.
     */
    public Mono<Integer> migrateDown(int target) {
        return migrator.migrateDown(target);
    }

    // ---- Lifecycle --------------------------------------------------------------------------

    /**
     * Stops gracefully, without blocking: every scheduler stops claiming, gives back its buffered
     * rows and waits up to its drain timeout for running steps; then maintenance, the poke
     * transport, the limiter and the engine's own pool close. A start still under way finishes (or
     * fails) first, so nothing it launches outlives the close. Errors are gathered, not
     * short-circuited. Idempotent: every call returns the same close. From the call on, client
     * calls fail with {@link EngineClosedException}; the close itself runs when the {@code Mono} is
     * subscribed ({@link #close()} subscribes and waits).
     */
    public Mono<Void> closeLater() {
        for (;;) {
            Lifecycle now = lifecycle.get();
            if (now.closing() != null) {
                return now.closing();
            }
            Mono<Void> closing = Mono.defer(this::doClose).cache();
            if (lifecycle.compareAndSet(now, now.closing(closing))) {
                return closing;
            }
        }
    }

    /**
     * Closes the engine as {@link #closeLater()} does and waits until it has: for try-with-resources,
     * a container's destroy method (Spring infers {@code close()} on a {@code @Bean DurableEngine})
     * and {@code main} methods. Waits at most {@link #closeTimeout()}, past which it throws a
     * {@link DurableTimeoutException} (the rest of the close goes on in the background). Blocks the
     * calling thread: call {@link #closeLater()} from reactive code.
     */
    @Override
    public void close() {
        Duration bound = closeTimeout();
        try {
            closeLater().block(bound);
        } catch (IllegalStateException late) {
            if (late.getMessage() != null && late.getMessage().startsWith("Timeout on blocking read")) {
                throw new DurableTimeoutException("engine " + options.name() + " did not close within " + bound);
            }
            throw late;
        }
    }

    /**
     * How long {@link #close()} waits: the longest drain timeout of the engine's queues plus one
     * bound for each other close step (a start in flight, the insert buffer, releasing buffered
     * rows, the transport and limiter, the pool) and a margin.
     */
    public Duration closeTimeout() {
        Duration drain = options.queues().values().stream().map(QueueOptions::drainTimeout)
                .max(Duration::compareTo).orElse(Duration.ZERO);
        return drain.plus(QueueScheduler.CLOSE_STEP.multipliedBy(6));
    }

    private Mono<Void> doClose() {
        Mono<Void> inFlight = lifecycle.get().starting();
        // A start stalled on the database is not waited for past one close step: it closes what it
        // made itself when it sees the engine closing.
        Mono<Void> started = inFlight == null ? Mono.empty()
                : inFlight.timeout(QueueScheduler.CLOSE_STEP, Mono.empty()).onErrorResume(error -> Mono.empty());
        Mono<Void> runtime = Mono.defer(() -> {
            EngineRuntime made = runtime();
            return made == null ? Mono.empty() : made.close();
        });
        Mono<Void> pool = Mono.defer(() -> ownPool == null ? Mono.empty() : ownPool.disposeLater())
                .timeout(QueueScheduler.CLOSE_STEP, Mono.fromRunnable(() -> log.warn(
                        "engine {}: connection pool not disposed within {}", options.name(), QueueScheduler.CLOSE_STEP)));
        return started
                .then(Cleanup.inOrder(List.of(batcher.drain().timeout(QueueScheduler.CLOSE_STEP, Mono.empty()), runtime,
                        pool)))
                .doOnSuccess(closed -> log.info("Durable engine {} closed", options.name()));
    }

    /**
     * Everything that happens to instances on this engine, as it happens: multicast to every
     * subscriber, each with a bounded buffer ({@link EngineOptions#eventBufferSize()}) that drops
     * its oldest events when the subscriber falls behind. A slow subscriber never slows the engine.
     * Filter with {@link JobEvent#ofQueue}, {@link JobEvent#ofType}, {@link JobEvent#ofInstance}.
     */
    public Flux<JobEvent> events() {
        return telemetry.events();
    }

    /** Events dropped so far because subscribers fell behind. */
    public long eventsDropped() {
        return telemetry.eventsDropped();
    }

    /**
     * What each of this engine's queue schedulers is doing and has done, in the order the queues
     * were configured; empty until the engine has started.
     */
    public List<QueueStats> queueStats() {
        EngineRuntime runtime = runtime();
        return runtime == null ? List.of() : runtime.queueStats();
    }

    /** What the scheduler of {@code queue} on this engine is doing; empty when it runs no such queue. */
    public Optional<QueueStats> queueStats(String queue) {
        return queueStats().stream().filter(stats -> stats.queue().equals(queue)).findFirst();
    }

    /**
     * The engines running now on this database and schema, from the registry every engine keeps
     * its entry in (refreshed with its heartbeat, expired when it stops): which queues each serves
     * and which types it knows. Any engine can ask, started or not.
     */
    public Flux<LiveEngine> liveEngines() {
        return whenOpen().thenMany(statements.registry().live());
    }

    /**
     * Work due now that no live engine can run: queues no engine serves, and rows whose type (at
     * their version) no engine serving their queue knows, as a rolling deploy can leave behind.
     * Such rows are never failed for it; they wait. Reads the head of each queue, not the backlog.
     */
    public Flux<UnservedWork> unservedWork() {
        return whenOpen().thenMany(Registry.unserved(statements.registry()));
    }

    /**
     * Fails every live (runnable or parked) instance of {@code type} with {@code reason}, for a type
     * removed for good; emits how many. Executing instances are left to finish. Parents count their
     * failed children off as for any other failure.
     */
    public Mono<Long> failUnrunnable(String type, String reason) {
        return whenOpen().then(Mono.fromRunnable(() -> {
                    RequestMapper.checkName("type", type);
                    if (reason == null || reason.isBlank()) {
                        throw new InvalidRequestException("reason must not be blank");
                    }
                }))
                .then(statements.registry().failType(type, reason, FAIL_BATCH)
                        .expand(failed -> failed == FAIL_BATCH ? statements.registry().failType(type, reason, FAIL_BATCH)
                                : Mono.empty())
                        .reduce(0L, Long::sum));
    }

    /**
     * Whether this engine is well, for health endpoints: up when it is running (started, not
     * closing) and its database answers a primary-key lookup within {@code timeout}; the fleet's
     * state (live engines, unserved work) in the details when it could be read in that time too.
     * Never errors: a failed check is a down health carrying the error.
     */
    public Mono<EngineHealth> health(Duration timeout) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            return Mono.error(new InvalidRequestException("timeout must be positive, was " + timeout));
        }
        return Mono.defer(() -> {
            Map<String, Object> details = EngineHealth.identity(this);
            Lifecycle now = lifecycle.get();
            if (now.runtime() == null || now.closing() != null) {
                details.put("engine", "not running");
                return Mono.just(new EngineHealth(false, details, null));
            }
            details.put("engine", "running");
            Mono<Map<String, Object>> fleet = Mono.zip(liveEngines().count(),
                            unservedWork().map(EngineHealth::describe).collectList())
                    .<Map<String, Object>>map(both -> Map.of("liveEngines", both.getT1(), "unservedWork", both.getT2()))
                    .onErrorResume(error -> Mono.just(Map.of()));
            // No instance has id 0 (ids start at 1): the lookup touches the index and finds nothing.
            return get(0L).hasElement()
                    .then(fleet)
                    .timeout(timeout, Mono.error(() -> new DurableTimeoutException(
                            "the database did not answer within " + timeout)))
                    .map(found -> {
                        Map<String, Object> all = new LinkedHashMap<>(details);
                        all.putAll(found);
                        return new EngineHealth(true, all, null);
                    })
                    .onErrorResume(error -> Mono.just(new EngineHealth(false, details, error)));
        });
    }

    /**
     * Runs the settled (done, failed or cancelled) instance {@code id} again from {@code step}, with the
     * state that step last started with: the instance keeps its id, args, parent, children, limits, keys
     * and attempt history, and comes back runnable at that step with a fresh attempt budget and no
     * result or error; its attempt history gains the attempt it settled with and a {@code replayed} one.
     * Signals it consumed are gone (as after a retry in place): a step that read a signal sees none when
     * replayed, so replay from the step that awaits it, or give the data in the state.
     * A workflow records the input of each step it leaves (the latest run's), and its own row holds the
     * input of the step it settled at; a job's one step, {@code run}, starts from its args. Emits the
     * instance as it is then (runnable). Of two replays racing, one wins; the other is refused as live.
     * Errors: {@link NoTargetException} for an unknown id; {@link ReplayRefusedException} when it is live
     * ({@code INSTANCE_LIVE}: fork it instead), when its type has no such step ({@code UNKNOWN_STEP}),
     * when it never ran that step ({@code NO_RECORDED_INPUT}: give a state), when it is a child whose
     * parent still waits ({@code PARENT_WAITS}), or when a live instance now holds its correlation key
     * ({@code KEY_OCCUPIED}).
     */
    public Mono<Instance> replay(long id, String step) {
        return replay(id, step, null);
    }

    /**
     * As {@link #replay(long, String)}, starting the step with {@code state} (its type's state, or a
     * job's args) instead of the recorded one, when not null; a state that does not decode as the type's
     * is an {@link InvalidArgumentsException}.
     */
    public Mono<Instance> replay(long id, String step, @Nullable Object state) {
        Objects.requireNonNull(step, "step");
        return whenOpen().then(replays.replay(id, step, state));
    }

    /**
     * Starts a new instance from instance {@code id}'s {@code step}, with the state that step last
     * started with: the same type, version, queue, priority, attempt budget, concurrency key and limits,
     * no correlation key and no parent, linked to the original (shown in the admin's detail). The
     * original may be live or settled and is left as it is. Emits the new id. Errors as
     * {@link #replay(long, String)} (but a live original is fine).
     */
    public Mono<Long> fork(long id, String step) {
        return fork(id, step, null);
    }

    /** As {@link #fork(long, String)}, starting the step with {@code state} instead, when not null. */
    public Mono<Long> fork(long id, String step, @Nullable Object state) {
        Objects.requireNonNull(step, "step");
        return whenOpen().then(replays.fork(id, step, state));
    }

    /** The recurring jobs this engine schedules, in the order they were added (for operators' tools). */
    public List<RecurringJob> recurringJobs() {
        return recurringJobs;
    }

    /**
     * The operator's API over this engine's schema: listing and search, counts, detail, and actions by
     * id or by filter. Usable before start (it runs no queue), refused once the engine is closed.
     */
    public DurableAdmin admin() {
        return admin;
    }

    /**
     * The engine's gates and rate limits for code outside jobs: permits from the same limiter and
     * counters as the jobs (see {@link EngineLimits}); asked of a started engine.
     */
    public EngineLimits limits() {
        return limits;
    }

    /**
     * This engine's maintenance tasks, to run one pass now or read what they did; empty until the
     * engine has started.
     */
    public Optional<Maintenance> maintenance() {
        EngineRuntime runtime = runtime();
        return runtime == null ? Optional.empty() : Optional.of(runtime.maintenance());
    }

    @Override
    public String toString() {
        return "DurableEngine{" + options + "}";
    }

    /** Registers the types an engine knows, then builds it. */
    public static final class Builder {

        private final EngineOptions options;
        private final Map<String, Definition> definitions = new LinkedHashMap<>();
        private final Map<String, RecurringJob> recurringJobs = new LinkedHashMap<>();
        private CallerTransactions callerTransactions = CallerTransactions.NONE;

        private Builder(EngineOptions options) {
            if (options == null) {
                throw new IllegalArgumentException("options must not be null");
            }
            this.options = options;
        }

        /** A job or workflow type this engine can insert and run; types are unique. */
        public Builder register(Definition definition) {
            if (definition == null) {
                throw new IllegalArgumentException("definition must not be null");
            }
            if (definitions.putIfAbsent(definition.type(), definition) != null) {
                throw new IllegalArgumentException("type '" + definition.type() + "' is registered twice");
            }
            return this;
        }

        /**
         * Work to insert on a cron schedule, exactly once per due time across every engine that
         * knows the schedule. Names are unique.
         */
        public Builder schedule(RecurringJob job) {
            if (job == null) {
                throw new IllegalArgumentException("job must not be null");
            }
            if (recurringJobs.putIfAbsent(job.name(), job) != null) {
                throw new IllegalArgumentException("recurring job '" + job.name() + "' is scheduled twice");
            }
            return this;
        }

        /**
         * Makes {@code insert}, {@code insertAll} and {@code insertAsync} join the transaction their
         * subscriber has open, as {@code transactions} finds it (the Spring Boot starter sets Spring's):
         * the instance then exists if and only if that transaction commits, and its queue is poked
         * after the commit. Outside a transaction they insert on the engine's own connections.
         */
        public Builder joinTransactions(CallerTransactions transactions) {
            if (transactions == null) {
                throw new IllegalArgumentException("transactions must not be null");
            }
            this.callerTransactions = transactions;
            return this;
        }

        public DurableEngine build() {
            return new DurableEngine(options, definitions, List.copyOf(recurringJobs.values()), callerTransactions);
        }
    }
}
