package dev.durable.internal.admin;

import dev.durable.CancelResult;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobRequest;
import dev.durable.Limits;
import dev.durable.limit.Limiter;
import dev.durable.limit.PermitSlots;
import dev.durable.NoTargetException;
import dev.durable.SignalResult;
import dev.durable.admin.Attempt;
import dev.durable.admin.BulkAction;
import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.BulkResult;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.GateUsage;
import dev.durable.admin.LimitUsage;
import dev.durable.admin.RateBucket;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.InstanceStateException;
import dev.durable.admin.Page;
import dev.durable.admin.PageRequest;
import dev.durable.QueueNames;
import dev.durable.admin.QueuePause;
import dev.durable.admin.SearchIndex;
import dev.durable.admin.StatusCount;
import java.time.Duration;
import dev.durable.internal.Replays;
import dev.durable.Definition;
import dev.durable.WorkflowDefinition;
import dev.durable.internal.engine.ClaimMigration;
import dev.durable.internal.sql.AdminSql;
import dev.durable.internal.sql.VersionSql;
import dev.durable.internal.sql.AdminSql.Count;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** {@link DurableAdmin} over one engine: its statements, its client calls for cancel and signal, its codec. */
public final class EngineAdmin implements DurableAdmin {

    private static final Set<InstanceStatus> LIVE = EnumSet.of(InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING,
            InstanceStatus.AWAITING_SIGNAL, InstanceStatus.AWAITING_CHILDREN);
    private static final Set<InstanceStatus> SETTLED = EnumSet.of(InstanceStatus.DONE, InstanceStatus.FAILED,
            InstanceStatus.CANCELLED);
    private static final Set<InstanceStatus> RETRYABLE = EnumSet.of(InstanceStatus.FAILED, InstanceStatus.CANCELLED);
    /** Signals and cancels of one bulk batch run this many at a time on the pool. */
    private static final int BULK_CONCURRENCY = 4;
    private static final reactor.util.Logger log = reactor.util.Loggers.getLogger(EngineAdmin.class);

    private final DurableEngine engine;
    private final AdminSql sql;
    private final Replays replays;
    private final VersionSql versions;
    private final Map<String, Definition> definitions;
    /** Empty while the engine is open, an EngineClosedException once it is closing (deferred: read per call). */
    private final Mono<Void> whenOpen;
    /** The running engine's limiter (null while it is not running): permits it keeps to itself. */
    private final Supplier<@Nullable Limiter> limiter;

    /** {@code versions} and the engine's {@code definitions} serve {@link #migrate} and {@link #failUnmigratable}. */
    public EngineAdmin(DurableEngine engine, AdminSql sql, Mono<Void> whenOpen, BulkJobs bulkJobs, Replays replays,
            VersionSql versions, Map<String, Definition> definitions, Supplier<@Nullable Limiter> limiter) {
        this.engine = engine;
        this.limiter = limiter;
        this.sql = sql;
        this.replays = replays;
        this.versions = versions;
        this.definitions = definitions;
        this.whenOpen = whenOpen;
        bulkJobs.bind(new BulkJobs.Actions() {
            @Override
            public Mono<Long> apply(BulkAction action, List<Long> ids, @Nullable Integer priority,
                    @Nullable Instant runAt) {
                return act(action, ids, priority, runAt);
            }

            @Override
            public Flux<Long> ids(InstanceFilter filter, long afterId, long upTo, int limit) {
                return sql.ids(filter, afterId, upTo, limit);
            }

            @Override
            public Mono<AdminSql.Chunk> count(InstanceFilter filter, long afterId, long upTo, int limit) {
                return sql.countIds(filter, afterId, upTo, limit);
            }
        });
    }

    @Override
    public Mono<Page<Instance>> list(InstanceFilter filter, PageRequest page) {
        boolean newestFirst = page.order() == PageRequest.Order.NEWEST_FIRST;
        // One more than the page says whether another page follows.
        return whenOpen.thenMany(sql.page(filter, newestFirst, page.startAfter(), page.size() + 1))
                .map(instance -> instance.withCodec(engine.codec()))
                .collectList()
                .map(rows -> {
                    if (rows.size() <= page.size()) {
                        return new Page<>(rows, null);
                    }
                    List<Instance> items = rows.subList(0, page.size());
                    return new Page<>(items, PageRequest.cursorFor(items.get(items.size() - 1).id()));
                });
    }

    @Override
    public Mono<List<StatusCount>> counts(long estimateAbove) {
        Mono<Map<Key, long[]>> live = sql.countLive().collectList().map(counts -> merge(counts, false, new TreeMap<>()));
        Mono<Map<Key, long[]>> settled = sql.historyRows().flatMap(rows -> {
            if (rows <= estimateAbove) {
                return sql.countSettled().collectList().map(counts -> merge(counts, false, new TreeMap<>()));
            }
            // A big history: the statistics' frequencies times its row count. Before the first ANALYZE
            // has gathered them there are none, and the history is counted once.
            return sql.estimateSettled(rows).collectList().flatMap(counts -> counts.isEmpty()
                    ? sql.countSettled().collectList().map(exact -> merge(exact, false, new TreeMap<>()))
                    : Mono.just(merge(counts, true, new TreeMap<>())));
        });
        return whenOpen.then(Mono.zip(live, settled, (hot, history) -> {
            Map<Key, long[]> all = new TreeMap<>(hot);
            history.forEach((key, value) -> all.merge(key, value, (a, b) -> new long[] {a[0] + b[0], a[1] | b[1]}));
            List<StatusCount> out = new ArrayList<>();
            all.forEach((key, value) -> out.add(new StatusCount(key.queue(), key.status(), value[0], value[1] == 1)));
            return out;
        }));
    }

    private record Key(String queue, InstanceStatus status) implements Comparable<Key> {

        @Override
        public int compareTo(Key other) {
            return Comparator.comparing(Key::queue).thenComparing(Key::status).compare(this, other);
        }
    }

    private static Map<Key, long[]> merge(List<Count> counts, boolean estimated, Map<Key, long[]> into) {
        for (Count count : counts) {
            into.merge(new Key(count.queue(), count.status()), new long[] {count.count(), estimated ? 1 : 0},
                    (a, b) -> new long[] {a[0] + b[0], a[1] | b[1]});
        }
        return into;
    }

    @Override
    public Mono<InstanceDetail> detail(long id) {
        return whenOpen.then(sql.detail(id, DETAIL_CHILDREN + 1, DETAIL_SIGNALS, DETAIL_ATTEMPTS)).flatMap(rows -> {
            Instance instance = rows.instance().withCodec(engine.codec());
            List<Instance> children = rows.children().stream().map(child -> child.withCodec(engine.codec())).toList();
            boolean more = children.size() > DETAIL_CHILDREN;
            // The step inputs and fork links are read after the rest, in statements of their own: a step the
            // instance left meanwhile shows as its own row read it (its recorded copy is the same state).
            return Mono.zip(replays.inputs(instance), replays.lineage(id, DETAIL_FORKS), (inputs, lineage) ->
                    // A settled instance has no inbox left; a live one has consumed nothing into the history yet.
                    new InstanceDetail(instance, more ? children.subList(0, DETAIL_CHILDREN) : children, more,
                            rows.inbox(), instance.status().isTerminal() ? rows.consumedSignals() : List.of(),
                            instance.lastError(), attempts(instance, rows.attempts()), inputs, lineage.forkedFrom(),
                            lineage.forks()));
        });
    }

    /**
     * The recorded attempts, then the one the row itself is: the attempt running now, or the one it settled
     * with (none when it never ran: attempt 0). A live row between attempts (runnable, parked) adds none.
     */
    private static List<Attempt> attempts(Instance instance, List<Attempt> recorded) {
        List<Attempt> all = new ArrayList<>(recorded);
        Attempt.Outcome outcome = switch (instance.status()) {
            case EXECUTING -> Attempt.Outcome.RUNNING;
            case DONE -> Attempt.Outcome.DONE;
            case FAILED -> Attempt.Outcome.FAILED;
            case CANCELLED -> Attempt.Outcome.CANCELLED;
            default -> null;
        };
        if (outcome != null && instance.attempt() > 0) {
            boolean running = outcome == Attempt.Outcome.RUNNING;
            all.add(new Attempt(instance.attempt(), instance.step(), running ? instance.claimedBy() : null,
                    running ? instance.updatedAt() : null, running ? null : instance.updatedAt(), outcome,
                    outcome == Attempt.Outcome.DONE ? null : instance.lastError()));
        }
        return all;
    }

    @Override
    public Mono<CancelResult> cancel(long id) {
        return engine.cancel(id, true).flatMap(result -> result == CancelResult.NOT_FOUND
                ? Mono.error(NoTargetException.noInstance(id, "to cancel"))
                : Mono.just(result));
    }

    @Override
    public Mono<Instance> retry(long id, @Nullable Instant runAt) {
        return whenOpen.thenMany(sql.retry(List.of(id), runAt, JobRequest.DEFAULT_OCCUPIED)).collectList()
                .flatMap(retried -> {
                    if (!retried.isEmpty()) {
                        engine.poke(retried.get(0).queue());
                        return engine.get(id);
                    }
                    return engine.get(id)
                            .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to retry")))
                            .flatMap(instance -> Mono.error(new InstanceStateException(id, instance.status(),
                                    RETRYABLE.contains(instance.status())
                                            ? "its parent still waits for it, or a live instance holds its"
                                                    + " correlation key '" + instance.correlationKey() + "'"
                                            : "only a failed or cancelled instance can be retried")));
                });
    }

    @Override
    public Mono<Instance> replay(long id, String step, @Nullable Object state) {
        return engine.replay(id, step, state);
    }

    @Override
    public Mono<Long> fork(long id, String step, @Nullable Object state) {
        return engine.fork(id, step, state);
    }

    @Override
    public Mono<Instance> runNow(long id) {
        return whenOpen.thenMany(sql.runNow(List.of(id))).collectList().flatMap(moved -> {
            moved.forEach(row -> engine.poke(row.queue()));
            return engine.get(id)
                    .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to run now")))
                    .flatMap(instance -> moved.isEmpty() && instance.status() != InstanceStatus.RUNNABLE
                            ? Mono.error(new InstanceStateException(id, instance.status(),
                                    "only a runnable instance can be run now"
                                            + (RETRYABLE.contains(instance.status()) ? " (retry a settled one)" : "")))
                            : Mono.just(instance));
        });
    }

    @Override
    public Mono<Instance> setPriority(long id, int priority) {
        return checkPriority(priority).then(whenOpen).thenMany(sql.setPriority(List.of(id), priority)).collectList()
                .flatMap(changed -> engine.get(id)
                        .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to reprioritise")))
                        .flatMap(instance -> changed.isEmpty() && instance.status().isTerminal()
                                ? Mono.error(new InstanceStateException(id, instance.status(),
                                        "a settled instance has no priority to change"))
                                : Mono.just(instance)));
    }

    private static Mono<Void> checkPriority(int priority) {
        return priority < JobRequest.MIN_PRIORITY || priority > JobRequest.MAX_PRIORITY
                ? Mono.error(new InvalidRequestException("priority must be between " + JobRequest.MIN_PRIORITY
                        + " and " + JobRequest.MAX_PRIORITY + ", was " + priority))
                : Mono.empty();
    }

    @Override
    public Mono<BulkResult> runNowAll(InstanceFilter filter, int batchSize) {
        return bulk(filter, EnumSet.of(InstanceStatus.RUNNABLE), batchSize, ids -> sql.runNow(ids).collectList()
                .map(moved -> {
                    moved.stream().map(AdminSql.Retried::queue).distinct().forEach(engine::poke);
                    return (long) moved.size();
                }));
    }

    @Override
    public Mono<BulkResult> setPriorityAll(InstanceFilter filter, int priority, int batchSize) {
        return checkPriority(priority).then(bulk(filter, LIVE, batchSize, ids -> sql.setPriority(ids, priority)
                .count()));
    }

    @Override
    public Mono<SignalResult> signal(long id, String name, @Nullable Object payload) {
        return engine.signal(id, name, payload, null);
    }

    @Override
    public Mono<Void> delete(long id) {
        return whenOpen.thenMany(sql.delete(List.of(id))).collectList().flatMap(deleted -> deleted.isEmpty()
                ? engine.get(id)
                        .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to delete")))
                        .flatMap(instance -> Mono.<Void>error(new InstanceStateException(id, instance.status(),
                                instance.status().isTerminal() ? "its parent still waits for it"
                                        : "a live instance cannot be deleted; cancel it first")))
                : Mono.empty());
    }

    @Override
    public Mono<BulkResult> cancelAll(InstanceFilter filter, int batchSize) {
        return bulk(filter, LIVE, batchSize, ids -> Flux.fromIterable(ids)
                .flatMap(id -> engine.cancel(id, true), BULK_CONCURRENCY)
                .filter(result -> result == CancelResult.CANCELLED || result == CancelResult.REQUESTED)
                .count());
    }

    @Override
    public Mono<BulkResult> retryAll(InstanceFilter filter, @Nullable Instant runAt, int batchSize) {
        return bulk(filter, RETRYABLE, batchSize, ids -> sql.retry(ids, runAt, JobRequest.DEFAULT_OCCUPIED)
                .collectList()
                .map(retried -> {
                    retried.stream().map(AdminSql.Retried::queue).distinct().forEach(engine::poke);
                    return (long) retried.size();
                }));
    }

    @Override
    public Mono<BulkResult> signalAll(InstanceFilter filter, String name, @Nullable Object payload, int batchSize) {
        return bulk(filter, LIVE, batchSize, ids -> Flux.fromIterable(ids)
                // An instance that settled since the batch was read is no target any more: skipped.
                .flatMap(id -> engine.signal(id, name, payload, null)
                        .onErrorResume(NoTargetException.class, gone -> Mono.empty()), BULK_CONCURRENCY)
                .filter(result -> result == SignalResult.DELIVERED)
                .count());
    }

    @Override
    public Mono<BulkResult> deleteAll(InstanceFilter filter, int batchSize) {
        return bulk(filter, SETTLED, batchSize, ids -> sql.delete(ids).count());
    }

    @Override
    public Mono<Boolean> pauseQueue(String queue) {
        return validQueue(queue).then(whenOpen).then(sql.pause(queue, engine.options().name()));
    }

    @Override
    public Mono<Boolean> resumeQueue(String queue) {
        return validQueue(queue).then(whenOpen).then(sql.resume(queue)).doOnNext(resumed -> {
            if (resumed) {
                engine.poke(queue);
            }
        });
    }

    @Override
    public Mono<List<QueuePause>> pausedQueues() {
        return whenOpen.thenMany(sql.pausedQueues()).collectList();
    }

    private static Mono<Void> validQueue(String queue) {
        return QueueNames.isValid(queue) ? Mono.empty()
                : Mono.error(new InvalidRequestException("queue must be 1 to 128 letters, digits, '.', '_', ':' or"
                        + " '-', starting with a letter or digit, was " + (queue == null ? "null" : "'" + queue + "'")));
    }

    @Override
    public Mono<Long> startBulk(BulkRequest request) {
        Integer priority = request.priority();
        Mono<Void> checked = priority == null ? Mono.empty() : checkPriority(priority);
        Set<InstanceStatus> statuses = EnumSet.copyOf(BulkJobs.applicable(request.action()));
        if (!request.filter().statuses().isEmpty()) {
            statuses.retainAll(request.filter().statuses());
        }
        if (statuses.isEmpty()) {
            return Mono.error(new InvalidRequestException("the filter's statuses " + request.filter().statuses()
                    + " leave none that " + request.action() + " applies to"));
        }
        InstanceFilter narrowed = request.filter().mutate().status(statuses).build();
        Instant runAt = request.runAt();
        return checked.then(whenOpen).then(sql.maxId()).flatMap(upTo -> engine.insert(JobRequest.of(BULK_TYPE,
                new BulkJobs.BulkState(request.action().name(), priority, runAt == null ? null : runAt.toString(),
                        request.batchSize(), BulkJobs.FilterState.of(narrowed), upTo, true, 0, 0, 0, 0, 0))));
    }

    @Override
    public Mono<BulkProgress> bulkProgress(long id) {
        return whenOpen.then(engine.get(id))
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to follow")))
                .flatMap(instance -> {
                    if (!BULK_TYPE.equals(instance.type())) {
                        return Mono.error(new InvalidRequestException("instance " + id + " is a '" + instance.type()
                                + "', not a bulk job"));
                    }
                    BulkJobs.BulkState state = instance.status() == InstanceStatus.DONE
                            ? instance.withCodec(engine.codec()).result(BulkJobs.BulkState.class)
                            : instance.withCodec(engine.codec()).state(BulkJobs.BulkState.class);
                    if (state == null) {
                        return Mono.error(new InvalidRequestException("bulk job " + id + " has no state"));
                    }
                    return Mono.just(new BulkProgress(id, BulkAction.valueOf(state.action()), instance.status(),
                            state.counting(), state.total(), state.done(), state.affected()));
                });
    }

    /** One chunk of a bulk job: the action on {@code ids}; emits how many it acted on. */
    private Mono<Long> act(BulkAction action, List<Long> ids, @Nullable Integer priority, @Nullable Instant runAt) {
        return switch (action) {
            case RETRY -> sql.retry(ids, runAt, JobRequest.DEFAULT_OCCUPIED).collectList().map(retried -> {
                retried.stream().map(AdminSql.Retried::queue).distinct().forEach(engine::poke);
                return (long) retried.size();
            });
            case CANCEL -> Flux.fromIterable(ids)
                    .flatMap(id -> engine.cancel(id, true), BULK_CONCURRENCY)
                    .filter(result -> result == CancelResult.CANCELLED || result == CancelResult.REQUESTED)
                    .count();
            case DELETE -> sql.delete(ids).count();
            case SET_PRIORITY -> sql.setPriority(ids, java.util.Objects.requireNonNull(priority, "priority")).count();
            case MIGRATE -> migrateChunk(ids);
        };
    }

    // ---- Versioned workflows ----------------------------------------------------------------------

    /** Rows failed per statement by {@link #failUnmigratable}: short transactions, however many rows. */
    private static final int FAIL_BATCH = 1000;

    @Override
    public Mono<Long> migrate(String type) {
        return whenOpen.then(Mono.defer(() -> {
            WorkflowDefinition<?> workflow = withMigrations(type);
            InstanceFilter filter = InstanceFilter.builder().type(type)
                    .typeVersionBetween(workflow.lowestVersion(), workflow.version() - 1).build();
            return startBulk(BulkRequest.migrate(filter));
        }));
    }

    @Override
    public Mono<Long> failUnmigratable(String type, int version) {
        return whenOpen.then(Mono.defer(() -> {
            Definition definition = definitions.get(type);
            if (!(definition instanceof WorkflowDefinition<?> workflow) || version >= definition.lowestVersion()) {
                return Mono.error(new InvalidRequestException(definition == null
                        ? "this engine does not know type '" + type + "', so it cannot tell which versions have no"
                                + " migration path"
                        : "version " + version + " of '" + type + "' is run or migrated by this engine (it runs versions "
                                + definition.lowestVersion() + " to " + definition.version() + "); only versions below "
                                + definition.lowestVersion() + " have no migration path"));
            }
            String error = "failed on purpose: workflow " + type + " has no migration path from version " + version
                    + " to " + workflow.version() + " (its migrations start at version " + workflow.lowestVersion() + ")";
            return versions.failVersion(type, version, error, FAIL_BATCH)
                    .expand(failed -> failed == FAIL_BATCH ? versions.failVersion(type, version, error, FAIL_BATCH)
                            : Mono.empty())
                    .reduce(0L, Long::sum);
        }));
    }

    private WorkflowDefinition<?> withMigrations(String type) {
        if (definitions.get(type) instanceof WorkflowDefinition<?> workflow && !workflow.migrations().isEmpty()) {
            return workflow;
        }
        throw new InvalidRequestException("this engine does not know '" + type + "' as a workflow with state migrations"
                + " (WorkflowDefinition.Builder.migration): nothing to migrate to");
    }

    /**
     * One chunk of a bulk migration: reads the rows as they are, migrates those this engine's definitions
     * can (in the application, on the handler scheduler: it is user code), writes them back guarded by
     * what was read. A row whose migration throws is left as it was. When this engine knows none of the
     * chunk's types the chunk fails (retried with backoff): another engine of the bulk queue may know them.
     */
    private Mono<Long> migrateChunk(List<Long> ids) {
        return versions.byIds(ids).collectList()
                .publishOn(engine.options().handlerScheduler())
                .flatMap(rows -> {
                    Map<String, List<VersionSql.Migrated>> byType = new TreeMap<>();
                    Set<String> unknown = new java.util.TreeSet<>();
                    for (VersionSql.Unmigrated row : rows) {
                        if (!(definitions.get(row.type()) instanceof WorkflowDefinition<?> workflow)
                                || workflow.migrations().isEmpty()) {
                            unknown.add(row.type());
                            continue;
                        }
                        if (row.typeVersion() < workflow.lowestVersion() || row.typeVersion() >= workflow.version()) {
                            continue;
                        }
                        try {
                            ClaimMigration.Migrated migrated = ClaimMigration.apply(workflow, row.type(), row.typeVersion(),
                                    row.step(), row.stateJson(), engine.codec());
                            byType.computeIfAbsent(row.type(), type -> new ArrayList<>())
                                    .add(new VersionSql.Migrated(row, migrated.step(), migrated.stateJson()));
                        } catch (ClaimMigration.MigrationFailedException failed) {
                            log.warn("instance {} not migrated: {}", row.id(), failed.getMessage());
                        }
                    }
                    if (!unknown.isEmpty() && byType.isEmpty() && unknown.size() == rows.stream()
                            .map(VersionSql.Unmigrated::type).distinct().count()) {
                        return Mono.error(new IllegalStateException("engine " + engine.options().name()
                                + " does not know " + unknown + " as workflows with state migrations: run queue "
                                + BULK_QUEUE + " on engines that do"));
                    }
                    return Flux.fromIterable(byType.entrySet())
                            .concatMap(entry -> versions.migrateSeen(entry.getKey(),
                                    ((WorkflowDefinition<?>) definitions.get(entry.getKey())).version(), entry.getValue()))
                            .reduce(0L, Long::sum);
                });
    }

    @Override
    public Mono<LimitUsage> limits() {
        EngineOptions options = engine.options();
        String limiter = String.valueOf(options.limiter());
        // The default factory names itself "postgres" (PostgresLimiter.factory()); another limiter keeps
        // its buckets to itself.
        boolean bucketsHere = POSTGRES_LIMITER.equals(limiter);
        Mono<List<GateUsage>> gates = sql.gateUsage(options.gates().values(), LIMIT_ROWS + 1).collectList()
                .zipWith(limiterPermits(), (rows, permits) -> withPermits(rows, permits, options.gates()));
        Mono<List<RateBucket>> buckets = bucketsHere
                ? sql.buckets(options.rateLimits().values(), LIMIT_ROWS + 1).collectList()
                : Mono.just(List.of());
        Mono<List<dev.durable.admin.WindowUsage>> windows = bucketsHere
                ? sql.windows(options.windows().values(), LIMIT_ROWS + 1).collectList()
                : Mono.just(List.of());
        return whenOpen.then(Mono.zip(gates, buckets, windows)).map(all -> new LimitUsage(
                first(all.getT1(), LIMIT_ROWS), all.getT1().size() > LIMIT_ROWS,
                first(all.getT2(), LIMIT_ROWS), all.getT2().size() > LIMIT_ROWS, !bucketsHere, limiter,
                first(all.getT3(), LIMIT_ROWS), all.getT3().size() > LIMIT_ROWS));
    }

    private static final String POSTGRES_LIMITER = "postgres";

    /** The slots of permits the limiter keeps to itself (Redis); none while the engine is not running. */
    private Mono<List<PermitSlots>> limiterPermits() {
        return Mono.defer(() -> {
            Limiter current = limiter.get();
            return current == null ? Mono.just(List.<PermitSlots>of()) : current.permitSlots(LIMIT_ROWS + 1)
                    // The rows the database counts are still worth showing while the limiter is away.
                    .onErrorResume(dev.durable.limit.LimiterUnavailableException.class, error -> {
                        log.debug("limits(): the limiter's permits left out ({})", error.toString());
                        return Mono.just(List.of());
                    });
        });
    }

    /**
     * The keys the database counts with the limiter's permit slots added, busiest first again. Each side
     * is its own top {@link #LIMIT_ROWS} + 1, so past that many keys the order of the merged tail is
     * approximate (a key just outside one side's top misses that side's count).
     */
    private static List<GateUsage> withPermits(List<GateUsage> rows, List<PermitSlots> permits,
            Map<String, Limits.Gate> gates) {
        if (permits.isEmpty()) {
            return rows;
        }
        Map<List<String>, GateUsage> merged = new java.util.LinkedHashMap<>();
        rows.forEach(row -> merged.put(List.of(row.gate(), row.key()), row));
        for (PermitSlots held : permits) {
            Limits.Gate gate = gates.get(held.gate());
            merged.merge(List.of(held.gate(), held.key()),
                    new GateUsage(held.gate(), held.key(), held.slots(), gate == null ? null : gate.capacity()),
                    (row, extra) -> new GateUsage(row.gate(), row.key(), row.held() + extra.held(), row.capacity()));
        }
        return merged.values().stream()
                .sorted(Comparator.comparingLong(GateUsage::held).reversed()
                        .thenComparing(GateUsage::gate).thenComparing(GateUsage::key))
                .toList();
    }

    private static <T> List<T> first(List<T> rows, int size) {
        return rows.size() > size ? rows.subList(0, size) : rows;
    }

    @Override
    public Mono<Set<SearchIndex>> searchIndexes() {
        return whenOpen.then(sql.searchIndexes());
    }

    @Override
    public Mono<Void> createSearchIndexes(Set<SearchIndex> indexes, Duration timeout) {
        if (timeout.isNegative() || timeout.isZero()) {
            return Mono.error(new InvalidRequestException("index build timeout must be positive, was " + timeout));
        }
        return whenOpen.then(sql.createSearchIndexes(indexes, timeout));
    }

    @Override
    public Mono<Void> dropSearchIndexes(Set<SearchIndex> indexes) {
        return whenOpen.then(sql.dropSearchIndexes(indexes));
    }

    /**
     * Runs {@code action} over the ids the filter matches among {@code applicable} statuses, in ascending
     * batches of {@code batchSize}, each read and acted on in its own statements (no long transaction).
     * Bounded above by the highest id when it starts, so instances inserted meanwhile are not chased.
     */
    private Mono<BulkResult> bulk(InstanceFilter filter, Set<InstanceStatus> applicable, int batchSize,
            Function<List<Long>, Mono<Long>> action) {
        if (batchSize < 1 || batchSize > PageRequest.MAX_SIZE * 10) {
            return Mono.error(new InvalidRequestException("batch size must be between 1 and "
                    + PageRequest.MAX_SIZE * 10 + ", was " + batchSize));
        }
        Set<InstanceStatus> statuses = EnumSet.copyOf(applicable);
        if (!filter.statuses().isEmpty()) {
            statuses.retainAll(filter.statuses());
        }
        if (statuses.isEmpty()) {
            return Mono.just(new BulkResult(0, 0, 0));
        }
        InstanceFilter narrowed = filter.mutate().status(statuses).build();
        return whenOpen.then(sql.maxId()).flatMap(upTo -> batch(narrowed, 0, upTo, batchSize, action)
                .expand(step -> step.full() ? batch(narrowed, step.lastId(), upTo, batchSize, action) : Mono.empty())
                .reduce(new BulkResult(0, 0, 0), (total, step) -> new BulkResult(total.matched() + step.matched(),
                        total.affected() + step.affected(), total.batches() + 1)));
    }

    private record Step(long lastId, boolean full, long matched, long affected) {
    }

    private Mono<Step> batch(InstanceFilter filter, long afterId, long upTo, int size,
            Function<List<Long>, Mono<Long>> action) {
        return sql.ids(filter, afterId, upTo, size).collectList().flatMap(ids -> ids.isEmpty()
                ? Mono.empty()
                : action.apply(ids).map(affected -> new Step(ids.get(ids.size() - 1), ids.size() == size, ids.size(),
                        affected)));
    }
}
