package dev.durable;

import dev.durable.admin.DurableAdmin;
import dev.durable.internal.EngineCore;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.engine.EngineRuntime;
import dev.durable.internal.engine.QueueScheduler;
import dev.durable.internal.engine.Registry;
import dev.durable.limit.EngineLimits;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

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

    /** The engine's parts and their wiring; every call below delegates to one of them. */
    private final EngineCore core;
    private final List<RecurringJob> recurringJobs;

    private DurableEngine(EngineOptions options, Map<String, Definition> definitions, List<RecurringJob> recurringJobs,
            CallerTransactions callerTransactions) {
        this.core = new EngineCore(options, definitions, recurringJobs, callerTransactions);
        this.recurringJobs = recurringJobs;
    }

    public static Builder builder(EngineOptions options) {
        return new Builder(options);
    }

    public EngineOptions options() {
        return core.options();
    }

    public JsonCodec codec() {
        return core.options().codec();
    }

    /** Applies the migrations (unless turned off), then starts the configured queues. Idempotent. */
    public Mono<Void> start() {
        return core.lifecycle().start();
    }

    /** Tells the schedulers of {@code queue} that work is there (after a transactional insert, say). */
    public void poke(String queue) {
        core.transitions().poke(queue);
    }

    // ---- Client API -------------------------------------------------------------------------

    /** Inserts one instance; emits its id, or a typed error naming what was wrong. */
    public Mono<Long> insert(JobRequest request) {
        return core.inserts().insert(request);
    }

    /**
     * Inserts many instances in one round trip; emits their ids in request order. Inside a caller's
     * transaction (see {@link Builder#joinTransactions}) the insert joins it. A request with a
     * {@link ConflictPolicy} other than reject is answered by the id that carries it (the holder it
     * skipped or changed, or the follow-up's id): {@link #insertWithResult} and
     * {@link #insertAll(List, InsertMode)} also say which.
     */
    public Mono<List<Long>> insertAll(List<JobRequest> requests) {
        return core.inserts().insertAll(requests);
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
     * Inserts many instances in one round trip. With {@link InsertMode#SKIP_DUPLICATES}, a request
     * whose correlation key is held by a live instance (or by an earlier request of the batch) is
     * skipped, and its result names the holder; with {@link InsertMode#REJECT_DUPLICATES} (as
     * {@link #insertAll(List)}) one such key fails the whole batch and nothing is inserted. A
     * request's own {@link JobRequest#onConflict conflict policy} overrides the mode; a batch with a
     * replace or debounce in it goes in one upsert statement (each key once per batch, also inside a
     * caller's transaction). Results come in request order.
     */
    public Mono<List<InsertResult>> insertAll(List<JobRequest> requests, InsertMode mode) {
        return core.inserts().insertAll(requests, mode);
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
        return core.inserts().insertAsync(request);
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
        return core.inserts().insertAll(connection, requests);
    }

    // ---- Outcomes from the caller's transaction ------------------------------------------------

    /**
     * Completes a run with {@code result} inside the transaction open on the caller's
     * {@code connection} (the outbox pattern turned round): the work the run did in that transaction
     * and its outcome commit together or not at all. Guarded like the engine's own commit, by the run's
     * {@link Claim} ({@link JobContext#claim()}, {@link StepContext#claim()}), used inside its run: a
     * claim no longer current (the lease was lost and the instance claimed again, it settled, or it went
     * on to another step on the same claim), or an instance whose cancel was requested, fails with
     * {@link StaleOutcomeException}, and the caller should roll back. The run's own outcome, when its
     * handler returns, is then dropped as stale. Same database as the engine's tables only; a connection
     * with no transaction open, or a transactional run's own, is an {@link InvalidRequestException}.
     *
     * <p>These outcomes settle the instance (done, failed, cancelled). Moving a workflow on to another
     * step belongs in a {@linkplain StepHandler#transactional transactional step}, whose writes commit
     * with its transition. The guard knows a claim by its worker, its attempt and the transaction
     * that made it ({@link Claim#stamp()}): a claim made by hand without the stamp matches no claim an
     * engine's pick made.
     *
     * <pre>{@code
     * JobDefinition.of("ship", Order.class, (order, context) -> Mono.usingWhen(pool.create(),
     *         connection -> Mono.from(connection.beginTransaction())
     *                 .then(shipments.insert(connection, order))
     *                 .then(engine.complete(connection, context.claim(), "shipped"))
     *                 .then(Mono.from(connection.commitTransaction())),
     *         Connection::close))
     * }</pre>
     */
    public Mono<Void> complete(Connection connection, Claim claim, @Nullable Object result) {
        return core.callerOutcomes().complete(connection, claim, result);
    }

    /** As {@link #complete(Connection, Claim, Object)}, failing the instance for good with {@code error}. */
    public Mono<Void> fail(Connection connection, Claim claim, String error) {
        return core.callerOutcomes().fail(connection, claim, error);
    }

    /** As {@link #complete(Connection, Claim, Object)}, ending the instance cancelled. */
    public Mono<Void> cancel(Connection connection, Claim claim) {
        return core.callerOutcomes().cancel(connection, claim);
    }

    /**
     * As {@link #complete(Connection, Claim, Object)}, in the transaction the subscriber has open
     * (found as {@link Builder#joinTransactions} finds it: inside Spring's {@code @Transactional} with
     * the starter); an {@link InvalidRequestException} when there is none to join.
     */
    public Mono<Void> complete(Claim claim, @Nullable Object result) {
        return core.callerOutcomes().joined().flatMap(connection -> complete(connection, claim, result));
    }

    /** As {@link #fail(Connection, Claim, String)}, in the transaction the subscriber has open. */
    public Mono<Void> fail(Claim claim, String error) {
        return core.callerOutcomes().joined().flatMap(connection -> fail(connection, claim, error));
    }

    /** The instance with that id, or empty. */
    public Mono<Instance> get(long id) {
        return core.instances().get(id);
    }

    /**
     * Instances by queue and status (either may be null for any), in id order, starting after
     * {@code afterId} (0 from the start), at most {@code limit}.
     */
    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        return core.instances().list(queue, status, afterId, limit);
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
        return core.instances().cancel(id, cascade);
    }

    /**
     * Delivers a signal to the live instance {@code id}: stored in its inbox and, when the instance
     * awaits {@code name}, wakes it. A repeated {@code dedupKey} is a no-op ({@link SignalResult#DUPLICATE}).
     * No live instance with that id is a {@link NoTargetException}.
     */
    public Mono<SignalResult> signal(long id, String name, @Nullable Object payload, @Nullable String dedupKey) {
        return core.instances().signal(id, null, name, payload, dedupKey, "with id " + id);
    }

    /** As {@link #signal(long, String, Object, String)}, addressed by the instance's live correlation key. */
    public Mono<SignalResult> signal(String correlationKey, String name, @Nullable Object payload,
            @Nullable String dedupKey) {
        return core.instances().signal(null, correlationKey, name, payload, dedupKey,
                "with correlation key '" + correlationKey + "'");
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
        return core.awaits().awaitIdle(timeout, horizon);
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
        return core.awaits().awaitStatus(id, timeout, InstanceStatus::isTerminal);
    }

    /**
     * As {@link #awaitSettled}, but after {@code timeout} completes with the instance as it stands
     * then (read afresh, in the shared read), settled or not: check {@code status()}.
     */
    public Mono<Instance> awaitSettledOrCurrent(long id, Duration timeout) {
        return core.awaits().awaitSettledOrCurrent(id, timeout);
    }

    /** As {@link #awaitSettled}, also completing when the instance parks (awaits a signal or children). */
    public Mono<Instance> awaitSettledOrParked(long id, Duration timeout) {
        return core.awaits().awaitStatus(id, timeout, status -> status.isTerminal() || status.isParked());
    }

    /**
     * Applies pending migrations without starting anything (for tools and tests); emits the schema's
     * version after. A schema migrated by a newer Durable, or by another history of its migrations,
     * is refused with {@link SchemaVersionException}, as {@link #start()} refuses it.
     */
    public Mono<Integer> migrate() {
        return core.migrator().migrate();
    }

    /**
     * Undoes the migrations above version {@code target}, newest first; {@code 0} removes every table
     * of Durable's schema, with its rows (tests, uninstall). Refused as {@link #migrate()} is.
     */
    public Mono<Integer> migrateDown(int target) {
        return core.migrator().migrateDown(target);
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
        return core.lifecycle().closeLater();
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
                throw new DurableTimeoutException("engine " + core.options().name() + " did not close within " + bound);
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
        Duration drain = core.options().queues().values().stream().map(QueueOptions::drainTimeout)
                .max(Duration::compareTo).orElse(Duration.ZERO);
        return drain.plus(QueueScheduler.CLOSE_STEP.multipliedBy(6));
    }

    /**
     * Everything that happens to instances on this engine, as it happens: multicast to every
     * subscriber, each with a bounded buffer ({@link EngineOptions#eventBufferSize()}) that drops
     * its oldest events when the subscriber falls behind. A slow subscriber never slows the engine.
     * Filter with {@link JobEvent#ofQueue}, {@link JobEvent#ofType}, {@link JobEvent#ofInstance}.
     */
    public Flux<JobEvent> events() {
        return core.telemetry().events();
    }

    /** Events dropped so far because subscribers fell behind. */
    public long eventsDropped() {
        return core.telemetry().eventsDropped();
    }

    /**
     * What each of this engine's queue schedulers is doing and has done, in the order the queues
     * were configured; empty until the engine has started.
     */
    public List<QueueStats> queueStats() {
        EngineRuntime runtime = core.lifecycle().runtime();
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
        return core.whenOpen().thenMany(core.statements().registry().live());
    }

    /**
     * Work due now that no live engine can run: queues no engine serves, and rows whose type (at
     * their version) no engine serving their queue knows, as a rolling deploy can leave behind.
     * Such rows are never failed for it; they wait. Reads the head of each queue, not the backlog.
     */
    public Flux<UnservedWork> unservedWork() {
        return core.whenOpen().thenMany(Registry.unserved(core.statements().registry()));
    }

    /**
     * Fails every live (runnable or parked) instance of {@code type} with {@code reason}, for a type
     * removed for good; emits how many. Executing instances are left to finish. Parents count their
     * failed children off as for any other failure.
     */
    public Mono<Long> failUnrunnable(String type, String reason) {
        return core.whenOpen().then(Mono.fromRunnable(() -> {
                    RequestMapper.checkName("type", type);
                    if (reason == null || reason.isBlank()) {
                        throw new InvalidRequestException("reason must not be blank");
                    }
                }))
                .then(Registry.failUnrunnable(core.statements().registry(), type, reason));
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
            if (!core.lifecycle().running()) {
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
        return core.replays().replay(id, step, state);
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
        return core.replays().fork(id, step, state);
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
        return core.admin();
    }

    /**
     * The engine's gates and rate limits for code outside jobs: permits from the same limiter and
     * counters as the jobs (see {@link EngineLimits}); asked of a started engine.
     */
    public EngineLimits limits() {
        return core.limits();
    }

    /**
     * This engine's maintenance tasks, to run one pass now or read what they did; empty until the
     * engine has started.
     */
    public Optional<Maintenance> maintenance() {
        EngineRuntime runtime = core.lifecycle().runtime();
        return runtime == null ? Optional.empty() : Optional.of(runtime.maintenance());
    }

    @Override
    public String toString() {
        return "DurableEngine{" + core.options() + "}";
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
            // Transactional runs hold a connection each while their handlers run: the pool must have room.
            if (definitions.values().stream().anyMatch(definition -> definition instanceof JobDefinition<?, ?> job
                    ? job.isTransactional()
                    : definition instanceof WorkflowDefinition<?> workflow && workflow.hasTransactionalStep())) {
                options.requirePoolFits(true);
            }
            return new DurableEngine(options, definitions, List.copyOf(recurringJobs.values()), callerTransactions);
        }
    }
}
