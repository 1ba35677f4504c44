package dev.durable.internal.admin;

import dev.durable.CancelResult;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobRequest;
import dev.durable.NoTargetException;
import dev.durable.SignalResult;
import dev.durable.admin.BulkAction;
import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.BulkResult;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import dev.durable.internal.sql.AdminActionSql;
import dev.durable.internal.sql.ListingSql;
import java.time.Instant;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The admin's actions by filter: at once, in the caller's call ({@code cancelAll}, {@code retryAll},
 * ...), batch after batch of ids, or as a durable bulk job ({@link BulkJobs}) whose chunks it acts on.
 * Either way each batch is read and acted on in short statements of its own (no long transaction), and
 * ids are bounded above by the highest id when the action starts, so rows inserted meanwhile are not
 * chased.
 */
final class BulkActions implements BulkJobs.Actions {

    static final Set<InstanceStatus> LIVE = EnumSet.of(InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING,
            InstanceStatus.AWAITING_SIGNAL, InstanceStatus.AWAITING_CHILDREN);
    static final Set<InstanceStatus> SETTLED = EnumSet.of(InstanceStatus.DONE, InstanceStatus.FAILED,
            InstanceStatus.CANCELLED);
    static final Set<InstanceStatus> RETRYABLE = EnumSet.of(InstanceStatus.FAILED, InstanceStatus.CANCELLED);
    /** Signals and cancels of one bulk batch run this many at a time on the pool. */
    private static final int BULK_CONCURRENCY = 4;

    private final EngineCalls engine;
    private final ListingSql listing;
    private final AdminActionSql actions;
    private final WorkflowMigrations migrations;
    /** Empty while the engine is open, an EngineClosedException once it is closing (deferred: read per call). */
    private final Mono<Void> whenOpen;

    BulkActions(EngineCalls engine, ListingSql listing, AdminActionSql actions, WorkflowMigrations migrations,
            Mono<Void> whenOpen) {
        this.engine = engine;
        this.listing = listing;
        this.actions = actions;
        this.migrations = migrations;
        this.whenOpen = whenOpen;
    }

    // ---- At once, in the caller's call ---------------------------------------------------------------

    Mono<BulkResult> runNowAll(InstanceFilter filter, int batchSize) {
        return bulk(filter, EnumSet.of(InstanceStatus.RUNNABLE), batchSize, this::runNow);
    }

    Mono<BulkResult> setPriorityAll(InstanceFilter filter, int priority, int batchSize) {
        return AdminChecks.priority(priority).then(bulk(filter, LIVE, batchSize, ids -> actions.setPriority(ids,
                priority).count()));
    }

    Mono<BulkResult> cancelAll(InstanceFilter filter, int batchSize) {
        return bulk(filter, LIVE, batchSize, this::cancel);
    }

    Mono<BulkResult> retryAll(InstanceFilter filter, @Nullable Instant runAt, int batchSize) {
        return bulk(filter, RETRYABLE, batchSize, ids -> retry(ids, runAt));
    }

    Mono<BulkResult> signalAll(InstanceFilter filter, String name, @Nullable Object payload, int batchSize) {
        return bulk(filter, LIVE, batchSize, ids -> Flux.fromIterable(ids)
                // An instance that settled since the batch was read is no target any more: skipped.
                .flatMap(id -> engine.signal(id, name, payload)
                        .onErrorResume(NoTargetException.class, gone -> Mono.empty()), BULK_CONCURRENCY)
                .filter(result -> result == SignalResult.DELIVERED)
                .count());
    }

    Mono<BulkResult> deleteAll(InstanceFilter filter, int batchSize) {
        return bulk(filter, SETTLED, batchSize, ids -> actions.delete(ids).count());
    }

    /**
     * Runs {@code action} over the ids the filter matches among {@code applicable} statuses, in ascending
     * batches of {@code batchSize}, each read and acted on in its own statements (no long transaction).
     * Bounded above by the highest id when it starts, so instances inserted meanwhile are not chased.
     */
    private Mono<BulkResult> bulk(InstanceFilter filter, Set<InstanceStatus> applicable, int batchSize,
            Function<List<Long>, Mono<Long>> action) {
        Set<InstanceStatus> statuses = EnumSet.copyOf(applicable);
        if (!filter.statuses().isEmpty()) {
            statuses.retainAll(filter.statuses());
        }
        if (statuses.isEmpty()) {
            return AdminChecks.batchSize(batchSize).thenReturn(new BulkResult(0, 0, 0));
        }
        InstanceFilter narrowed = filter.mutate().status(statuses).build();
        return AdminChecks.batchSize(batchSize).then(whenOpen).then(listing.maxId())
                .flatMap(upTo -> batch(narrowed, 0, upTo, batchSize, action)
                        .expand(step -> step.full() ? batch(narrowed, step.lastId(), upTo, batchSize, action)
                                : Mono.empty())
                        .reduce(new BulkResult(0, 0, 0), (total, step) -> new BulkResult(
                                total.matched() + step.matched(), total.affected() + step.affected(),
                                total.batches() + 1)));
    }

    private record Step(long lastId, boolean full, long matched, long affected) {
    }

    private Mono<Step> batch(InstanceFilter filter, long afterId, long upTo, int size,
            Function<List<Long>, Mono<Long>> action) {
        return listing.ids(filter, afterId, upTo, size).collectList().flatMap(ids -> ids.isEmpty()
                ? Mono.empty()
                : action.apply(ids).map(affected -> new Step(ids.get(ids.size() - 1), ids.size() == size, ids.size(),
                        affected)));
    }

    // ---- As a durable bulk job ---------------------------------------------------------------------

    Mono<Long> start(BulkRequest request) {
        Integer priority = request.priority();
        Mono<Void> checked = priority == null ? Mono.empty() : AdminChecks.priority(priority);
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
        return checked.then(whenOpen).then(listing.maxId()).flatMap(upTo -> engine.insert(JobRequest.of(
                DurableAdmin.BULK_TYPE, new BulkJobs.BulkState(request.action().name(), priority,
                        runAt == null ? null : runAt.toString(), request.batchSize(),
                        BulkJobs.FilterState.of(narrowed), upTo, true, 0, 0, 0, 0, 0))));
    }

    Mono<BulkProgress> progress(long id) {
        return whenOpen.then(engine.get(id))
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to follow")))
                .flatMap(instance -> {
                    if (!DurableAdmin.BULK_TYPE.equals(instance.type())) {
                        return Mono.error(new InvalidRequestException("instance " + id + " is a '" + instance.type()
                                + "', not a bulk job"));
                    }
                    BulkJobs.BulkState state = instance.status() == InstanceStatus.DONE
                            ? instance.withCodec(engine.options().codec()).result(BulkJobs.BulkState.class)
                            : instance.withCodec(engine.options().codec()).state(BulkJobs.BulkState.class);
                    if (state == null) {
                        return Mono.error(new InvalidRequestException("bulk job " + id + " has no state"));
                    }
                    return Mono.just(new BulkProgress(id, BulkAction.valueOf(state.action()), instance.status(),
                            state.counting(), state.total(), state.done(), state.affected()));
                });
    }

    /** One chunk of a bulk job: the action on {@code ids}; emits how many it acted on. */
    @Override
    public Mono<Long> apply(BulkAction action, List<Long> ids, @Nullable Integer priority, @Nullable Instant runAt) {
        return switch (action) {
            case RETRY -> retry(ids, runAt);
            case CANCEL -> cancel(ids);
            case DELETE -> actions.delete(ids).count();
            case SET_PRIORITY -> actions.setPriority(ids, Objects.requireNonNull(priority, "priority")).count();
            case MIGRATE -> migrations.migrateChunk(ids);
        };
    }

    @Override
    public Flux<Long> ids(InstanceFilter filter, long afterId, long upTo, int limit) {
        return listing.ids(filter, afterId, upTo, limit);
    }

    @Override
    public Mono<ListingSql.Chunk> count(InstanceFilter filter, long afterId, long upTo, int limit) {
        return listing.countIds(filter, afterId, upTo, limit);
    }

    // ---- One batch's action, either way ------------------------------------------------------------

    private Mono<Long> retry(List<Long> ids, @Nullable Instant runAt) {
        return pokeQueuesOf(actions.retry(ids, runAt, JobRequest.DEFAULT_OCCUPIED));
    }

    private Mono<Long> runNow(List<Long> ids) {
        return pokeQueuesOf(actions.runNow(ids));
    }

    /** Wakes the queues of the rows an action made due, once each; emits how many rows it moved. */
    private Mono<Long> pokeQueuesOf(Flux<AdminActionSql.Retried> moved) {
        return moved.collectList().map(rows -> {
            rows.stream().map(AdminActionSql.Retried::queue).distinct().forEach(engine::poke);
            return (long) rows.size();
        });
    }

    private Mono<Long> cancel(List<Long> ids) {
        return Flux.fromIterable(ids)
                .flatMap(engine::cancelWithDescendants, BULK_CONCURRENCY)
                .filter(result -> result == CancelResult.CANCELLED || result == CancelResult.REQUESTED)
                .count();
    }
}
