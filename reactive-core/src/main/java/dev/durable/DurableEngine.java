package dev.durable;

import dev.durable.internal.Db;
import dev.durable.internal.engine.Executor;
import dev.durable.internal.engine.Maintenance;
import dev.durable.internal.engine.OutcomeCommitter;
import dev.durable.internal.engine.QueueScheduler;
import dev.durable.internal.engine.WorkerIdentity;
import dev.durable.internal.sql.InstanceStore;
import dev.durable.internal.sql.Migrator;
import dev.durable.internal.sql.Rows.CancelRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.internal.sql.Sql;
import dev.durable.poke.PokeContext;
import dev.durable.poke.PokeTransport;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

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
public final class DurableEngine {

    private static final Logger log = Loggers.getLogger(DurableEngine.class);
    private static final String JOB_STEP = "run";

    private final EngineOptions options;
    private final Map<String, JobDefinition<?, ?>> definitions;
    private final @Nullable ConnectionPool ownPool;
    private final ConnectionFactory connectionFactory;
    private final InstanceStore store;
    private final Migrator migrator;
    private final WorkerIdentity identity;
    private final List<QueueScheduler> schedulers = new ArrayList<>();
    private @Nullable PokeTransport pokeTransport;
    private @Nullable Maintenance maintenance;
    private @Nullable OutcomeCommitter committer;
    private @Nullable Mono<Void> starting;
    private @Nullable Mono<Void> closing;

    private DurableEngine(EngineOptions options, Map<String, JobDefinition<?, ?>> definitions) {
        this.options = options;
        this.definitions = Map.copyOf(definitions);
        if (options.connectionFactory() != null) {
            this.ownPool = null;
            this.connectionFactory = options.connectionFactory();
        } else {
            ConnectionFactory target = ConnectionFactories.get(ConnectionFactoryOptions.parse(options.url()));
            this.ownPool = new ConnectionPool(ConnectionPoolConfiguration.builder(target)
                    .name("durable-" + options.name())
                    .initialSize(1)
                    .maxSize(options.poolMaxSize())
                    .maxIdleTime(Duration.ofMinutes(5))
                    .build());
            this.connectionFactory = ownPool;
        }
        Db db = new Db(connectionFactory);
        this.store = new InstanceStore(db, new Sql(options.schema()));
        this.migrator = new Migrator(db, options.schema());
        this.identity = WorkerIdentity.create(options.name());
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
    public synchronized Mono<Void> start() {
        if (starting == null) {
            starting = Mono.defer(this::doStart).cache();
        }
        return starting;
    }

    private Mono<Void> doStart() {
        Mono<Integer> migrated = options.applyMigrations() ? migrator.migrate() : Mono.just(0);
        return migrated
                .then(options.pokeTransport().create(new PokeContext(identity.origin(), connectionFactory,
                        options.schema())))
                .flatMap(transport -> {
                    synchronized (this) {
                        pokeTransport = transport;
                        committer = new OutcomeCommitter(store, options.commitBatchSize(), options.commitParallelism());
                        Executor executor = new Executor(definitions, options.codec(), committer,
                                options.handlerScheduler(), options.maxPayloadBytes(), options.leaseTtl(),
                                this::afterTransition);
                        for (QueueOptions queue : options.queues().values()) {
                            schedulers.add(new QueueScheduler(queue, store, executor, transport.pokes(), identity,
                                    options.leaseTtl(), options.heartbeatInterval(), options.pokeWindow(),
                                    options.pickRetries()));
                        }
                        if (options.runMaintenance()) {
                            maintenance = new Maintenance(store, options.reaperInterval(), this::afterTransition);
                            maintenance.start();
                        }
                    }
                    return Flux.fromIterable(schedulers).concatMap(QueueScheduler::start).then();
                })
                .doOnSuccess(started -> log.info("Durable engine {} started: schema {}, queues {}",
                        options.name(), options.schema(), options.queues().keySet()));
    }

    /** A row that became runnable again (retry, reaper): its queue's schedulers may want it. */
    private void afterTransition(Transition transition) {
        if (transition.status() == InstanceStatus.RUNNABLE) {
            poke(transition.queue());
        }
    }

    /** Tells the schedulers of {@code queue} that work is there (after a transactional insert, say). */
    public void poke(String queue) {
        PokeTransport transport = pokeTransport;
        if (transport != null) {
            transport.poke(queue);
        }
    }

    // ---- Client API -------------------------------------------------------------------------

    /** Inserts one instance; emits its id, or a typed error naming what was wrong. */
    public Mono<Long> insert(JobRequest request) {
        return insertAll(List.of(request)).map(ids -> ids.get(0));
    }

    /** Inserts many instances in one round trip; emits their ids in request order. */
    public Mono<List<Long>> insertAll(List<JobRequest> requests) {
        return Mono.fromCallable(() -> toRows(requests))
                .flatMap(rows -> store.insert(rows).collectList()
                        .doOnSuccess(ids -> pokeQueues(rows)));
    }

    /**
     * Inserts one instance on the caller's connection, inside the transaction it has open: the job
     * exists if and only if the caller's transaction commits.
     */
    public Mono<Long> insert(Connection connection, JobRequest request) {
        return insertAll(connection, List.of(request)).map(ids -> ids.get(0));
    }

    /** Inserts many instances on the caller's connection, inside its open transaction. */
    public Mono<List<Long>> insertAll(Connection connection, List<JobRequest> requests) {
        return Mono.fromCallable(() -> toRows(requests))
                .flatMap(rows -> store.insert(connection, rows).collectList()
                        .flatMap(ids -> {
                            PokeTransport transport = pokeTransport;
                            if (transport == null) {
                                return Mono.just(ids);
                            }
                            return Flux.fromIterable(queuesOf(rows))
                                    .concatMap(queue -> transport.pokeOnCommit(connection, queue))
                                    .then(Mono.just(ids));
                        }));
    }

    /** The instance with that id, or empty. */
    public Mono<Instance> get(long id) {
        return store.get(id);
    }

    /**
     * Instances by queue and status (either may be null for any), in id order, starting after
     * {@code afterId} (0 from the start), at most {@code limit}.
     */
    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        if (limit < 1) {
            return Flux.error(new InvalidRequestException("limit must be at least 1, was " + limit));
        }
        return store.list(queue, status, afterId, limit);
    }

    /**
     * Cancels an instance: at once when it is runnable or parked; when it is executing, at its next
     * commit (its outcome is discarded).
     */
    public Mono<CancelResult> cancel(long id) {
        return store.cancel(id)
                .map(DurableEngine::cancelResult)
                .defaultIfEmpty(CancelResult.NOT_FOUND);
    }

    private static CancelResult cancelResult(CancelRow row) {
        if (row.after() == null) {
            return CancelResult.ALREADY_SETTLED;
        }
        return row.after() == InstanceStatus.CANCELLED ? CancelResult.CANCELLED : CancelResult.REQUESTED;
    }

    /** Applies pending migrations without starting anything (for tools and tests). */
    public Mono<Integer> migrate() {
        return migrator.migrate();
    }

    /** Removes every table of Durable's schema (tests, uninstall). */
    public Mono<Integer> migrateDown(int target) {
        return migrator.migrateDown(target);
    }

    // ---- Lifecycle --------------------------------------------------------------------------

    /**
     * Stops gracefully: every scheduler stops claiming, gives back its buffered rows and waits up to
     * its drain timeout for running steps; then maintenance, the poke transport and the engine's own
     * pool close. Errors are gathered, not short-circuited. Idempotent.
     */
    public synchronized Mono<Void> close() {
        if (closing == null) {
            closing = Mono.defer(this::doClose).cache();
        }
        return closing;
    }

    private Mono<Void> doClose() {
        List<QueueScheduler> toClose;
        synchronized (this) {
            toClose = List.copyOf(schedulers);
            if (maintenance != null) {
                maintenance.stop();
            }
        }
        Mono<Void> transport = Mono.defer(() -> pokeTransport == null ? Mono.empty() : pokeTransport.close());
        Mono<Void> pool = Mono.defer(() -> ownPool == null ? Mono.empty() : ownPool.disposeLater());
        return Mono.whenDelayError(toClose.stream().map(QueueScheduler::close).toList())
                .then(Mono.whenDelayError(transport))
                .then(pool)
                .doOnSuccess(closed -> log.info("Durable engine {} closed", options.name()));
    }

    /** The queue schedulers, for tests and metrics. */
    public List<QueueScheduler> schedulers() {
        return List.copyOf(schedulers);
    }

    /** The reaper, when this engine runs maintenance. */
    public Optional<Maintenance> maintenance() {
        return Optional.ofNullable(maintenance);
    }

    // ---- Requests to rows -------------------------------------------------------------------

    private List<NewInstance> toRows(List<JobRequest> requests) {
        if (requests.isEmpty()) {
            throw new InvalidRequestException("requests must not be empty");
        }
        List<NewInstance> rows = new ArrayList<>(requests.size());
        for (JobRequest request : requests) {
            rows.add(toRow(request));
        }
        return rows;
    }

    private NewInstance toRow(JobRequest request) {
        String type = request.type();
        if (type == null || type.isBlank()) {
            throw new InvalidRequestException("type must not be blank");
        }
        JobDefinition<?, ?> definition = definitions.get(type);
        if (definition == null && options.rejectUnknownTypes()) {
            throw new UnknownTypeException(type);
        }
        String queue = request.queue() != null ? request.queue()
                : definition != null ? definition.queue() : JobDefinition.DEFAULT_QUEUE;
        checkName("queue", queue);
        int maxAttempts = request.maxAttempts() != null ? request.maxAttempts()
                : definition != null ? definition.maxAttempts() : JobDefinition.DEFAULT_MAX_ATTEMPTS;
        if (maxAttempts < 1) {
            throw new InvalidRequestException("maxAttempts must be at least 1, was " + maxAttempts);
        }
        long delayMillis = 0;
        if (request.runIn() != null) {
            if (request.runIn().isNegative()) {
                throw new InvalidRequestException("runIn must not be negative, was " + request.runIn());
            }
            delayMillis = request.runIn().toMillis();
        }
        if (request.concurrencyKey() != null) {
            checkKey("concurrencyKey", request.concurrencyKey());
        }
        String occupied = null;
        if (request.correlationKey() != null) {
            checkKey("correlationKey", request.correlationKey());
            if (request.occupiedStatuses().isEmpty()) {
                throw new InvalidRequestException("the occupied statuses of a correlation key must not be empty");
            }
            occupied = request.occupiedStatuses().stream().map(InstanceStatus::sqlName).sorted()
                    .collect(Collectors.joining(","));
        }
        String state = request.args() == null ? null : encodePayload("arguments", request.args());
        return new NewInstance(type, 1, queue, request.priority(), JOB_STEP, state, maxAttempts,
                request.runAt() == null ? null : request.runAt().toString(), delayMillis, null,
                request.concurrencyKey(), request.correlationKey(), occupied);
    }

    private String encodePayload(String what, Object value) {
        String json = options.codec().encode(value);
        int bytes = json.getBytes(StandardCharsets.UTF_8).length;
        if (bytes > options.maxPayloadBytes()) {
            throw new PayloadTooLargeException(what, bytes, options.maxPayloadBytes());
        }
        return json;
    }

    private static void checkName(String what, String value) {
        if (value.isBlank() || value.length() > 128 || !value.strip().equals(value)) {
            throw new InvalidRequestException(what + " must be 1 to 128 characters with no leading or"
                    + " trailing blanks, was '" + value + "'");
        }
    }

    private static void checkKey(String what, String value) {
        if (value.isBlank() || value.length() > 1024) {
            throw new InvalidRequestException(what + " must be 1 to 1024 characters and not blank, was '"
                    + (value.length() > 64 ? value.substring(0, 64) + "..." : value) + "'");
        }
    }

    private void pokeQueues(List<NewInstance> rows) {
        for (String queue : queuesOf(rows)) {
            poke(queue);
        }
    }

    private static Set<String> queuesOf(List<NewInstance> rows) {
        Set<String> queues = new LinkedHashSet<>();
        for (NewInstance row : rows) {
            queues.add(row.queue());
        }
        return queues;
    }

    @Override
    public String toString() {
        return "DurableEngine{" + options + "}";
    }

    /** Registers the types an engine knows, then builds it. */
    public static final class Builder {

        private final EngineOptions options;
        private final Map<String, JobDefinition<?, ?>> definitions = new LinkedHashMap<>();

        private Builder(EngineOptions options) {
            if (options == null) {
                throw new IllegalArgumentException("options must not be null");
            }
            this.options = options;
        }

        /** A job type this engine can insert and run; types are unique. */
        public Builder register(JobDefinition<?, ?> definition) {
            if (definition == null) {
                throw new IllegalArgumentException("definition must not be null");
            }
            if (definitions.putIfAbsent(definition.type(), definition) != null) {
                throw new IllegalArgumentException("type '" + definition.type() + "' is registered twice");
            }
            return this;
        }

        public DurableEngine build() {
            return new DurableEngine(options, definitions);
        }
    }
}
