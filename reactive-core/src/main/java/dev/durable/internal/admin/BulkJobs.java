package dev.durable.internal.admin;

import dev.durable.InstanceStatus;
import dev.durable.Outcome;
import dev.durable.StepContext;
import dev.durable.WorkflowDefinition;
import dev.durable.admin.BulkAction;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * Bulk actions as a durable workflow of type {@link DurableAdmin#BULK_TYPE} in queue
 * {@link DurableAdmin#BULK_QUEUE}: step {@code count} counts the instances the filter matches in chunks
 * of {@link #COUNT_CHUNK} ids (keyset over ids, one short statement each), step {@code act} reads a batch
 * of ids after the last one done and acts on it in the statements of the action (each short; no
 * transaction spans a chunk). Each chunk ends with an inline next step carrying the new position and
 * counts, which the engine commits before the next chunk starts: a crash loses at most the chunk in
 * progress, and the job's next attempt (after the reaper returns it) does that chunk again. Every action
 * is idempotent on a row it already acted on (a retried row is no longer failed, a cancelled one no
 * longer live, a deleted one gone, a priority already set is left alone), so doing a chunk twice is
 * harmless. Ids are bounded above by the highest id when the job was started: rows inserted later are
 * not chased.
 */
public final class BulkJobs {

    /** Ids counted per step of {@code count}. */
    static final int COUNT_CHUNK = 10_000;

    /** The filter, as the job's JSON state holds it (instants as ISO-8601 text). */
    public record FilterState(List<String> queues, List<String> types, List<String> statuses,
            @Nullable String correlationKey, @Nullable String correlationKeyPrefix, @Nullable String stateContains,
            @Nullable String errorContains, @Nullable String insertedFrom, @Nullable String insertedTo,
            @Nullable String updatedFrom, @Nullable String updatedTo, @Nullable String eligibleFrom,
            @Nullable String eligibleTo, @Nullable Long parentId, @Nullable Integer typeVersionFrom,
            @Nullable Integer typeVersionTo) {

        static FilterState of(InstanceFilter f) {
            return new FilterState(f.queues(), f.types(), f.statuses().stream().map(InstanceStatus::sqlName).sorted()
                    .toList(), f.correlationKey(), f.correlationKeyPrefix(), f.stateContains(), f.errorContains(),
                    text(f.insertedFrom()), text(f.insertedTo()), text(f.updatedFrom()), text(f.updatedTo()),
                    text(f.eligibleFrom()), text(f.eligibleTo()), f.parentId(), f.typeVersionFrom(),
                    f.typeVersionTo());
        }

        InstanceFilter toFilter() {
            InstanceFilter.Builder b = InstanceFilter.builder();
            if (!queues.isEmpty()) {
                b.queue(queues.toArray(String[]::new));
            }
            if (!types.isEmpty()) {
                b.type(types.toArray(String[]::new));
            }
            if (!statuses.isEmpty()) {
                b.status(statuses.stream().map(InstanceStatus::fromSql).collect(java.util.stream.Collectors.toSet()));
            }
            if (correlationKey != null) {
                b.correlationKey(correlationKey);
            }
            if (correlationKeyPrefix != null) {
                b.correlationKeyPrefix(correlationKeyPrefix);
            }
            if (stateContains != null) {
                b.stateContains(stateContains);
            }
            if (errorContains != null) {
                b.errorContains(errorContains);
            }
            if (insertedFrom != null || insertedTo != null) {
                b.insertedBetween(instant(insertedFrom), instant(insertedTo));
            }
            if (updatedFrom != null || updatedTo != null) {
                b.updatedBetween(instant(updatedFrom), instant(updatedTo));
            }
            if (eligibleFrom != null || eligibleTo != null) {
                b.eligibleBetween(instant(eligibleFrom), instant(eligibleTo));
            }
            if (parentId != null) {
                b.parentId(parentId);
            }
            if (typeVersionFrom != null || typeVersionTo != null) {
                b.typeVersionBetween(typeVersionFrom, typeVersionTo);
            }
            return b.build();
        }

        private static @Nullable String text(@Nullable Instant instant) {
            return instant == null ? null : instant.toString();
        }

        private static @Nullable Instant instant(@Nullable String text) {
            return text == null ? null : Instant.parse(text);
        }
    }

    /**
     * A bulk job's state: what to do (action, priority, runAt, batch size, the filter already narrowed to
     * the statuses the action applies to, the id bound), and where it stands: the last id counted and the
     * count ({@code countedTo}, {@code total}) while {@code counting}, then the last id acted on and the
     * ids gone through and acted on ({@code doneTo}, {@code done}, {@code affected}).
     */
    public record BulkState(String action, @Nullable Integer priority, @Nullable String runAt, int batchSize,
            FilterState filter, long upTo, boolean counting, long countedTo, long total, long doneTo, long done,
            long affected) {

        BulkState counted(long to, long more, boolean finished) {
            return new BulkState(action, priority, runAt, batchSize, filter, upTo, !finished, to, total + more, doneTo,
                    done, affected);
        }

        BulkState acted(long to, long more, long acted) {
            return new BulkState(action, priority, runAt, batchSize, filter, upTo, false, countedTo, total, to,
                    done + more, affected + acted);
        }
    }

    /** What a chunk's action is: the ids to act on -> how many it acted on. */
    interface Actions {
        Mono<Long> apply(BulkAction action, List<Long> ids, @Nullable Integer priority, @Nullable Instant runAt);

        reactor.core.publisher.Flux<Long> ids(InstanceFilter filter, long afterId, long upTo, int limit);

        Mono<dev.durable.internal.sql.ListingSql.Chunk> count(InstanceFilter filter, long afterId, long upTo, int limit);
    }

    private final AtomicReference<@Nullable Actions> actions = new AtomicReference<>();

    /** The workflow to register; it acts through the admin bound later ({@link #bind}). */
    public WorkflowDefinition<BulkState> definition() {
        // Version 2: the filter gained type-version bounds and the action MIGRATE. An older engine (which
        // would drop the bounds it cannot read, widening the filter) never claims a version it does not know.
        return WorkflowDefinition.builder(DurableAdmin.BULK_TYPE, BulkState.class)
                .version(2)
                .queue(DurableAdmin.BULK_QUEUE)
                .backoff(dev.durable.Backoff.exponential(Duration.ofSeconds(1), Duration.ofMinutes(1)))
                .step("count", this::count)
                .step("act", this::act)
                .build();
    }

    void bind(Actions bound) {
        actions.set(bound);
    }

    private Actions actions() {
        Actions bound = actions.get();
        if (bound == null) {
            throw new IllegalStateException("bulk jobs are not bound to an engine's admin");
        }
        return bound;
    }

    private Mono<Outcome<BulkState>> count(StepContext<BulkState> context) {
        BulkState state = state(context);
        return actions().count(state.filter().toFilter(), state.countedTo(), state.upTo(), COUNT_CHUNK)
                .map(chunk -> {
                    boolean finished = chunk.count() < COUNT_CHUNK;
                    Long last = chunk.lastId();
                    BulkState next = state.counted(last == null ? state.countedTo() : last, chunk.count(), finished);
                    return Outcome.next(finished ? "act" : "count", next).inline();
                });
    }

    private Mono<Outcome<BulkState>> act(StepContext<BulkState> context) {
        BulkState state = state(context);
        Actions bound = actions();
        return bound.ids(state.filter().toFilter(), state.doneTo(), state.upTo(), state.batchSize()).collectList()
                .flatMap(ids -> {
                    if (ids.isEmpty()) {
                        return Mono.just(Outcome.<BulkState>done(state));
                    }
                    // The job never acts on itself (a cancel or priority filter may match its own queue).
                    List<Long> targets = ids.stream().filter(id -> id != context.id()).toList();
                    Mono<Long> acted = targets.isEmpty() ? Mono.just(0L)
                            : bound.apply(BulkAction.valueOf(state.action()), targets, state.priority(),
                                    state.runAt() == null ? null : Instant.parse(state.runAt()));
                    return acted.map(affected -> {
                        BulkState next = state.acted(ids.get(ids.size() - 1), ids.size(), affected);
                        return ids.size() < state.batchSize() ? Outcome.<BulkState>done(next)
                                : Outcome.next("act", next).inline();
                    });
                });
    }

    private static BulkState state(StepContext<BulkState> context) {
        BulkState state = context.state();
        if (state == null) {
            throw new IllegalStateException("bulk job " + context.id() + " has no state");
        }
        return state;
    }

    /** The statuses each action applies to. */
    static Set<InstanceStatus> applicable(BulkAction action) {
        return switch (action) {
            case RETRY -> Set.of(InstanceStatus.FAILED, InstanceStatus.CANCELLED);
            case DELETE -> Set.of(InstanceStatus.DONE, InstanceStatus.FAILED, InstanceStatus.CANCELLED);
            case CANCEL, SET_PRIORITY -> Set.of(InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING,
                    InstanceStatus.AWAITING_SIGNAL, InstanceStatus.AWAITING_CHILDREN);
            // An executing row migrates at its next claim (a claim in flight has its own guard).
            case MIGRATE -> Set.of(InstanceStatus.RUNNABLE, InstanceStatus.AWAITING_SIGNAL,
                    InstanceStatus.AWAITING_CHILDREN);
        };
    }
}
