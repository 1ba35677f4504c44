package dev.durable.internal.admin;

import dev.durable.CancelResult;
import dev.durable.Definition;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobRequest;
import dev.durable.JsonCodec;
import dev.durable.NoTargetException;
import dev.durable.SignalResult;
import dev.durable.admin.Attempt;
import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.BulkResult;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.InstanceStateException;
import dev.durable.admin.LimitUsage;
import dev.durable.admin.Page;
import dev.durable.admin.PageRequest;
import dev.durable.admin.QueueActivity;
import dev.durable.admin.QueueDepth;
import dev.durable.admin.QueuePause;
import dev.durable.admin.SearchIndex;
import dev.durable.admin.StatusCount;
import dev.durable.internal.Replays;
import dev.durable.internal.sql.AdminStatements;
import dev.durable.internal.sql.StatusCountSql.Count;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * {@link DurableAdmin} over one engine: reads and actions by id here, over the admin's statements and
 * the engine's client calls ({@link EngineCalls}); actions by filter in {@link BulkActions}, workflow
 * migrations in {@link WorkflowMigrations}, the limits' view in {@link LimitUsages}.
 */
public final class EngineAdmin implements DurableAdmin {

    /** The longest window {@link #activity} reads: a month of minutes. */
    private static final Duration LONGEST_WINDOW = Duration.ofDays(31);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final EngineCalls engine;
    private final AdminStatements sql;
    private final Replays replays;
    /** Empty while the engine is open, an EngineClosedException once it is closing (deferred: read per call). */
    private final Mono<Void> whenOpen;
    private final BulkActions bulk;
    private final WorkflowMigrations migrations;
    private final LimitUsages limits;

    /**
     * {@code definitions}: the types the engine knows, for migrations; {@code bulkJobs}: the engine's
     * bulk workflow, bound here to the actions its chunks run.
     */
    public EngineAdmin(EngineCalls engine, AdminStatements sql, Mono<Void> whenOpen, BulkJobs bulkJobs,
            Replays replays, Map<String, Definition> definitions) {
        this.engine = engine;
        this.sql = sql;
        this.replays = replays;
        this.whenOpen = whenOpen;
        this.migrations = new WorkflowMigrations(engine, sql.versions(), definitions);
        this.bulk = new BulkActions(engine, sql.listing(), sql.actions(), migrations, whenOpen);
        this.limits = new LimitUsages(engine, sql.limits());
        bulkJobs.bind(bulk);
    }

    private JsonCodec codec() {
        return engine.options().codec();
    }

    // ---- Reads ------------------------------------------------------------------------------------

    @Override
    public Mono<Page<Instance>> list(InstanceFilter filter, PageRequest page) {
        boolean newestFirst = page.order() == PageRequest.Order.NEWEST_FIRST;
        // One more than the page says whether another page follows.
        return whenOpen.thenMany(sql.listing().page(filter, newestFirst, page.startAfter(), page.size() + 1))
                .map(instance -> instance.withCodec(codec()))
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
        Mono<Map<Key, long[]>> live = sql.counts().countLive().collectList()
                .map(counts -> merge(counts, false, new TreeMap<>()));
        Mono<Map<Key, long[]>> settled = sql.counts().historyRows().flatMap(rows -> {
            if (rows <= estimateAbove) {
                return sql.counts().countSettled().collectList().map(counts -> merge(counts, false, new TreeMap<>()));
            }
            // A big history: the statistics' frequencies times its row count. Before the first ANALYZE
            // has gathered them there are none, and the history is counted once.
            return sql.counts().estimateSettled(rows).collectList().flatMap(counts -> counts.isEmpty()
                    ? sql.counts().countSettled().collectList().map(exact -> merge(exact, false, new TreeMap<>()))
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

    @Override
    public Mono<List<QueueActivity>> activity(Duration window, Duration bucket, @Nullable String queue) {
        return Mono.defer(() -> {
            if (window == null || bucket == null || !wholeMinutes(window) || !wholeMinutes(bucket)
                    || window.toSeconds() % bucket.toSeconds() != 0 || window.compareTo(LONGEST_WINDOW) > 0) {
                return Mono.error(new InvalidRequestException("activity: the window and the bucket must be whole"
                        + " minutes, the bucket a divisor of the window, the window at most " + LONGEST_WINDOW.toDays()
                        + " days; were " + window + " and " + bucket));
            }
            return whenOpen.thenMany(sql.activity().read(window, bucket, queue)).collectList();
        });
    }

    private static boolean wholeMinutes(Duration duration) {
        return !duration.isNegative() && !duration.isZero() && duration.toSeconds() % 60 == 0 && duration.toNanosPart() == 0;
    }

    @Override
    public Mono<List<QueueDepth>> depths() {
        return whenOpen.thenMany(sql.activity().depths()).collectList();
    }

    @Override
    public Mono<byte[]> sharedSecret(String name) {
        return Mono.defer(() -> {
            if (name == null || name.isBlank() || name.length() > 200) {
                return Mono.error(new InvalidRequestException("sharedSecret: a name of 1 to 200 characters, not blank;"
                        + " was " + (name == null ? "null" : "'" + name + "'")));
            }
            // SecureRandom may block while the system gathers entropy: drawn off the caller's thread, once per name.
            Mono<byte[]> made = Mono.fromCallable(() -> {
                        byte[] candidate = new byte[32];
                        RANDOM.nextBytes(candidate);
                        return candidate;
                    })
                    .subscribeOn(Schedulers.boundedElastic())
                    .flatMap(candidate -> sql.secrets().secret(name, candidate));
            return whenOpen.then(sql.secrets().read(name)).switchIfEmpty(made);
        });
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
        return whenOpen.then(sql.details().detail(id, DETAIL_CHILDREN + 1, DETAIL_SIGNALS, DETAIL_ATTEMPTS))
                .flatMap(rows -> {
                    Instance instance = rows.instance().withCodec(codec());
                    List<Instance> children = rows.children().stream().map(child -> child.withCodec(codec())).toList();
                    boolean more = children.size() > DETAIL_CHILDREN;
                    // The step inputs and fork links are read after the rest, in statements of their own: a step
                    // the instance left meanwhile shows as its own row read it (its recorded copy is the same state).
                    return Mono.zip(replays.inputs(instance), replays.lineage(id, DETAIL_FORKS), (inputs, lineage) ->
                            // A settled instance has no inbox left; a live one has consumed nothing into the
                            // history yet.
                            new InstanceDetail(instance, more ? children.subList(0, DETAIL_CHILDREN) : children, more,
                                    rows.inbox(), instance.status().isTerminal() ? rows.consumedSignals() : List.of(),
                                    instance.lastError(), attempts(instance, rows.attempts()), inputs,
                                    lineage.forkedFrom(), lineage.forks()));
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

    // ---- Actions by id ----------------------------------------------------------------------------

    @Override
    public Mono<CancelResult> cancel(long id) {
        return engine.cancelWithDescendants(id).flatMap(result -> result == CancelResult.NOT_FOUND
                ? Mono.error(NoTargetException.noInstance(id, "to cancel"))
                : Mono.just(result));
    }

    @Override
    public Mono<Instance> retry(long id, @Nullable Instant runAt) {
        return whenOpen.thenMany(sql.actions().retry(List.of(id), runAt, JobRequest.DEFAULT_OCCUPIED)).collectList()
                .flatMap(retried -> {
                    if (!retried.isEmpty()) {
                        engine.poke(retried.get(0).queue());
                        return engine.get(id);
                    }
                    return engine.get(id)
                            .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to retry")))
                            .flatMap(instance -> Mono.error(new InstanceStateException(id, instance.status(),
                                    BulkActions.RETRYABLE.contains(instance.status())
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
        return whenOpen.thenMany(sql.actions().runNow(List.of(id))).collectList().flatMap(moved -> {
            moved.forEach(row -> engine.poke(row.queue()));
            return engine.get(id)
                    .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to run now")))
                    .flatMap(instance -> moved.isEmpty() && instance.status() != InstanceStatus.RUNNABLE
                            ? Mono.error(new InstanceStateException(id, instance.status(),
                                    "only a runnable instance can be run now"
                                            + (BulkActions.RETRYABLE.contains(instance.status())
                                                    ? " (retry a settled one)" : "")))
                            : Mono.just(instance));
        });
    }

    @Override
    public Mono<Instance> setPriority(long id, int priority) {
        return AdminChecks.priority(priority).then(whenOpen).thenMany(sql.actions().setPriority(List.of(id), priority))
                .collectList()
                .flatMap(changed -> engine.get(id)
                        .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to reprioritise")))
                        .flatMap(instance -> changed.isEmpty() && instance.status().isTerminal()
                                ? Mono.error(new InstanceStateException(id, instance.status(),
                                        "a settled instance has no priority to change"))
                                : Mono.just(instance)));
    }

    @Override
    public Mono<SignalResult> signal(long id, String name, @Nullable Object payload) {
        return engine.signal(id, name, payload);
    }

    @Override
    public Mono<Void> delete(long id) {
        return whenOpen.thenMany(sql.actions().delete(List.of(id))).collectList().flatMap(deleted -> deleted.isEmpty()
                ? engine.get(id)
                        .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to delete")))
                        .flatMap(instance -> Mono.<Void>error(new InstanceStateException(id, instance.status(),
                                instance.status().isTerminal() ? "its parent still waits for it"
                                        : "a live instance cannot be deleted; cancel it first")))
                : Mono.empty());
    }

    // ---- Actions by filter ------------------------------------------------------------------------

    @Override
    public Mono<BulkResult> cancelAll(InstanceFilter filter, int batchSize) {
        return bulk.cancelAll(filter, batchSize);
    }

    @Override
    public Mono<BulkResult> retryAll(InstanceFilter filter, @Nullable Instant runAt, int batchSize) {
        return bulk.retryAll(filter, runAt, batchSize);
    }

    @Override
    public Mono<BulkResult> signalAll(InstanceFilter filter, String name, @Nullable Object payload, int batchSize) {
        return bulk.signalAll(filter, name, payload, batchSize);
    }

    @Override
    public Mono<BulkResult> deleteAll(InstanceFilter filter, int batchSize) {
        return bulk.deleteAll(filter, batchSize);
    }

    @Override
    public Mono<BulkResult> runNowAll(InstanceFilter filter, int batchSize) {
        return bulk.runNowAll(filter, batchSize);
    }

    @Override
    public Mono<BulkResult> setPriorityAll(InstanceFilter filter, int priority, int batchSize) {
        return bulk.setPriorityAll(filter, priority, batchSize);
    }

    @Override
    public Mono<Long> startBulk(BulkRequest request) {
        return bulk.start(request);
    }

    @Override
    public Mono<BulkProgress> bulkProgress(long id) {
        return bulk.progress(id);
    }

    // ---- Queues -----------------------------------------------------------------------------------

    @Override
    public Mono<Boolean> pauseQueue(String queue) {
        return AdminChecks.queue(queue).then(whenOpen).then(sql.actions().pause(queue, engine.options().name()));
    }

    @Override
    public Mono<Boolean> resumeQueue(String queue) {
        return AdminChecks.queue(queue).then(whenOpen).then(sql.actions().resume(queue)).doOnNext(resumed -> {
            if (resumed) {
                engine.poke(queue);
            }
        });
    }

    @Override
    public Mono<List<QueuePause>> pausedQueues() {
        return whenOpen.thenMany(sql.actions().pausedQueues()).collectList();
    }

    // ---- Versioned workflows ----------------------------------------------------------------------

    @Override
    public Mono<Long> migrate(String type) {
        return whenOpen.then(Mono.defer(() -> startBulk(BulkRequest.migrate(migrations.migratable(type)))));
    }

    @Override
    public Mono<Long> failUnmigratable(String type, int version) {
        return whenOpen.then(migrations.failUnmigratable(type, version));
    }

    // ---- Limits and search indexes ----------------------------------------------------------------

    @Override
    public Mono<LimitUsage> limits() {
        return whenOpen.then(limits.read());
    }

    @Override
    public Mono<Set<SearchIndex>> searchIndexes() {
        return whenOpen.then(sql.searchIndexes().searchIndexes());
    }

    @Override
    public Mono<Void> createSearchIndexes(Set<SearchIndex> indexes, Duration timeout) {
        if (timeout.isNegative() || timeout.isZero()) {
            return Mono.error(new InvalidRequestException("index build timeout must be positive, was " + timeout));
        }
        return whenOpen.then(sql.searchIndexes().createSearchIndexes(indexes, timeout));
    }

    @Override
    public Mono<Void> dropSearchIndexes(Set<SearchIndex> indexes) {
        return whenOpen.then(sql.searchIndexes().dropSearchIndexes(indexes));
    }
}
