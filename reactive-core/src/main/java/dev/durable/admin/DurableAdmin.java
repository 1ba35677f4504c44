package dev.durable.admin;

import dev.durable.CancelResult;
import dev.durable.Instance;
import dev.durable.SignalResult;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The operator's API over one engine's schema: listing and search over live and settled instances,
 * counts, detail with the attempt history, actions by id or by filter (retry in place, run now, priority,
 * cancel, signal, delete), replay from a step and fork, bulk actions as durable jobs ({@link #startBulk}), pausing and resuming queues
 * across every engine, and the opt-in search indexes. Get it from {@link dev.durable.DurableEngine#admin()};
 * it needs no started queue. Every call is one statement or a bounded loop of them on the engine's pool;
 * errors are typed ({@link dev.durable.NoTargetException} for an unknown id, {@link InstanceStateException}
 * when the action does not apply, {@link dev.durable.InvalidRequestException} for a bad filter or cursor).
 *
 * <p>A dead-letter view is {@code list(InstanceFilter.builder().status(FAILED).queue(q).build(), page)},
 * and a redrive is {@link #retryAll} over the same filter.
 */
public interface DurableAdmin {

    /** The most children {@link #detail} returns. */
    int DETAIL_CHILDREN = 100;

    /** The most signals of the inbox {@link #detail} returns. */
    int DETAIL_SIGNALS = 100;

    /** The most attempts {@link #detail} returns (the newest). */
    int DETAIL_ATTEMPTS = 100;

    /** The most forks {@link #detail} returns. */
    int DETAIL_FORKS = 100;

    /** The rows a bulk action reads and acts on per batch. */
    int DEFAULT_BATCH_SIZE = 500;

    /** One page of the instances the filter matches, live and settled, in the request's order. */
    Mono<Page<Instance>> list(InstanceFilter filter, PageRequest page);

    /**
     * Instances by queue and status. Live statuses are counted (live rows are few and indexed). Settled
     * ones are counted too while the history is small; once it holds more than
     * {@code estimateAbove} rows by the planner's reckoning they are estimated from the statistics
     * ANALYZE keeps on (queue, status) ({@code StatusCount.estimated}), so the call reads a few catalog
     * rows whatever the table's size. Sorted by queue, then status.
     */
    Mono<List<StatusCount>> counts(long estimateAbove);

    /** {@link #counts(long)} estimating settled rows above 100,000 history rows. */
    default Mono<List<StatusCount>> counts() {
        return counts(100_000);
    }

    /**
     * What the fleet's runs did over the last {@code window}, per queue, summed into stretches of
     * {@code bucket}, oldest first; {@code queue} one queue, or null for all. The stretches start on
     * multiples of the bucket since the epoch and end with the one that holds the database's now
     * (still filling); only those with something in them are returned. Read from the counts every
     * engine adds every heartbeat interval (table durable_queue_minutes, kept as long as the
     * {@linkplain dev.durable.EngineOptions#retention() retention}), so every engine and dashboard
     * replica answers the same, also after a restart. One statement over the window's minutes of
     * every queue (seven days of ten queues: 100,800 rows, about 0.2 s). Outcomes the count misses
     * are listed on {@link QueueActivity}. {@link dev.durable.InvalidRequestException} unless the
     * window and the bucket are whole minutes, the bucket divides the window, and the window is at
     * most 31 days.
     */
    Mono<List<QueueActivity>> activity(Duration window, Duration bucket, @Nullable String queue);

    /**
     * The rows due now per queue, with the age of the oldest (queues with none are left out): what
     * waits for a free worker, fleet-wide. One statement that reads the pick index whole (a backlog of
     * a million due rows takes it about 0.2 s: benchmarks/README.md). Also published as the
     * {@code durable.queue.depth} and {@code durable.queue.age} gauges.
     */
    Mono<List<QueueDepth>> depths();

    /**
     * A random secret of 32 bytes stored under {@code name} in the database, made by the first caller
     * and read alike by every engine on the database after: for signing what several replicas must all
     * check (the dashboard signs its CSRF tokens with one). Anyone who may read Durable's tables may read
     * it. A read of one row; the first call for a name also draws the secret (off the caller's thread)
     * and inserts it. {@link dev.durable.InvalidRequestException} for a blank name or one longer than 200
     * characters.
     */
    Mono<byte[]> sharedSecret(String name);

    /**
     * The instance with its children, inbox or consumed signals, last error and attempt history; empty
     * when no instance has that id.
     */
    Mono<InstanceDetail> detail(long id);

    /** Cancels as {@link dev.durable.DurableEngine#cancel(long, boolean)} does, with its live descendants. */
    Mono<CancelResult> cancel(long id);

    /**
     * Retries a failed or cancelled instance in place: the same id, args, state and step (the step it
     * failed at) come back as runnable, due at {@code runAt} (now when null), with a fresh attempt
     * budget. Errors with {@link InstanceStateException} when it is not failed or cancelled, when its
     * parent still waits for it, or when a live instance now holds its correlation key. It runs under
     * the gate and rate limit it last ran under. This engine's schedulers of its queue are poked; other
     * engines pick it at their next poll.
     */
    Mono<Instance> retry(long id, @Nullable Instant runAt);

    default Mono<Instance> retry(long id) {
        return retry(id, null);
    }

    /**
     * Replays a settled instance from {@code step}, with {@code state} or, when null, the state that step
     * last started with: as {@link dev.durable.DurableEngine#replay(long, String, Object)}, whose errors it
     * has ({@link dev.durable.NoTargetException}, {@link dev.durable.ReplayRefusedException}).
     */
    Mono<Instance> replay(long id, String step, @Nullable Object state);

    /**
     * Forks an instance (live or settled) from {@code step} into a new one linked to it: as
     * {@link dev.durable.DurableEngine#fork(long, String, Object)}. Emits the new id.
     */
    Mono<Long> fork(long id, String step, @Nullable Object state);

    /**
     * Makes a runnable instance due now (one scheduled later by a run-at or a retry's backoff); one
     * already due keeps its place. Errors with {@link InstanceStateException} when it is not runnable
     * (executing, parked or settled: a settled one is retried with {@link #retry}). This engine's
     * schedulers of its queue are poked.
     */
    Mono<Instance> runNow(long id);

    /**
     * Sets the priority of a live instance (lower runs first, between {@link dev.durable.JobRequest#MIN_PRIORITY}
     * and {@link dev.durable.JobRequest#MAX_PRIORITY}); an executing one keeps it for its next attempts
     * and steps. Errors with {@link InstanceStateException} when it is settled, with
     * {@link dev.durable.InvalidRequestException} for a priority out of range.
     */
    Mono<Instance> setPriority(long id, int priority);

    /** Signals as {@link dev.durable.DurableEngine#signal(long, String, Object, String)} does. */
    Mono<SignalResult> signal(long id, String name, @Nullable Object payload);

    /**
     * Deletes a settled instance (its signals with it; its children stay). Errors with
     * {@link InstanceStateException} when it is live (cancel it first) or its parent still waits for it.
     */
    Mono<Void> delete(long id);

    /** Cancels every live instance the filter matches, in batches of {@code batchSize}. */
    Mono<BulkResult> cancelAll(InstanceFilter filter, int batchSize);

    /** Retries in place every failed or cancelled instance the filter matches, in batches. */
    Mono<BulkResult> retryAll(InstanceFilter filter, @Nullable Instant runAt, int batchSize);

    /** Signals every live instance the filter matches, in batches. */
    Mono<BulkResult> signalAll(InstanceFilter filter, String name, @Nullable Object payload, int batchSize);

    /** Deletes every settled instance the filter matches, in batches. */
    Mono<BulkResult> deleteAll(InstanceFilter filter, int batchSize);

    /** Makes every runnable instance the filter matches that is scheduled later due now, in batches. */
    Mono<BulkResult> runNowAll(InstanceFilter filter, int batchSize);

    /** Sets the priority of every live instance the filter matches, in batches. */
    Mono<BulkResult> setPriorityAll(InstanceFilter filter, int priority, int batchSize);

    default Mono<BulkResult> runNowAll(InstanceFilter filter) {
        return runNowAll(filter, DEFAULT_BATCH_SIZE);
    }

    default Mono<BulkResult> setPriorityAll(InstanceFilter filter, int priority) {
        return setPriorityAll(filter, priority, DEFAULT_BATCH_SIZE);
    }

    default Mono<BulkResult> cancelAll(InstanceFilter filter) {
        return cancelAll(filter, DEFAULT_BATCH_SIZE);
    }

    default Mono<BulkResult> retryAll(InstanceFilter filter) {
        return retryAll(filter, null, DEFAULT_BATCH_SIZE);
    }

    default Mono<BulkResult> signalAll(InstanceFilter filter, String name, @Nullable Object payload) {
        return signalAll(filter, name, payload, DEFAULT_BATCH_SIZE);
    }

    default Mono<BulkResult> deleteAll(InstanceFilter filter) {
        return deleteAll(filter, DEFAULT_BATCH_SIZE);
    }

    /**
     * Pauses {@code queue} on every engine: no engine picks its rows from the next pick on (the pick
     * statement excludes a paused queue), and claim-on-insert stops within a heartbeat interval (each
     * engine reads the paused queues on its registry tick). Running work finishes, including inline
     * steps of a claim already held; inserts, signals and maintenance go on, and the rows wait. Persisted
     * (table durable_queue_pauses): a restarted engine finds the queue paused. Emits true when it was
     * running, false when it was paused already. {@link dev.durable.InvalidRequestException} for an
     * invalid queue name.
     */
    Mono<Boolean> pauseQueue(String queue);

    /**
     * Resumes a paused queue: every engine picks its rows again at its next poll, this engine's
     * schedulers at once (they are poked, as are other engines through the poke transport when one is
     * configured). Emits true when it was paused, false when it was not.
     */
    Mono<Boolean> resumeQueue(String queue);

    /** The paused queues, by name. */
    Mono<List<QueuePause>> pausedQueues();

    /** The most gate keys and the most rate-limit buckets {@link #limits()} returns. */
    int LIMIT_ROWS = 200;

    /**
     * The live use of gates and rate limits, whatever limiter the engine uses. Gates: per (gate, key), the
     * executing instances with a live lease, counted from the instances themselves (so the answer holds
     * for the Redis limiter as for the PostgreSQL one), plus the slots of live permits
     * ({@code engine.limits()}): the PostgreSQL limiter's from its table, a limiter that keeps them to
     * itself (Redis) through {@link dev.durable.limit.Limiter#permitSlots} (left out while it is
     * unreachable); with the capacity this engine configures for the gate; busiest first. Rate limits: the token buckets of the PostgreSQL limiter with their tokens
     * refilled to now as the pick refills them, emptiest first; when the engine's limiter is another one,
     * its buckets live there ({@link LimitUsage#bucketsInLimiter()}). Sliding windows: likewise, per
     * partition what their live slots counted, fullest first. Each part is bounded by
     * {@link #LIMIT_ROWS}. Three statements, no locks (and, with the Redis limiter, a SCAN of its gate
     * counters).
     */
    Mono<LimitUsage> limits();

    /** The type of the bulk jobs {@link #startBulk} inserts (every engine knows it). */
    String BULK_TYPE = "durable.bulk";

    /** The queue bulk jobs run in: configure it on the engines that should run them. */
    String BULK_QUEUE = "durable.admin";

    /**
     * Starts a bulk action over every instance the request's filter matches as a durable job (a workflow
     * of type {@link #BULK_TYPE} in queue {@link #BULK_QUEUE}, which some engine must run:
     * {@code QueueOptions.builder(DurableAdmin.BULK_QUEUE)}); emits its instance id at once. The job first
     * counts the matching instances in chunks of 10,000 ids, then acts on them in chunks of the request's
     * batch size, in id order, up to the highest id when it started. Each chunk is a few short statements
     * and its progress is committed before the next starts, so the job is safe over millions of rows (no
     * long transaction, no lock held across chunks) and resumes after a crash from its last committed
     * chunk (the chunk in progress is done again; every action is harmless on a row it already acted on).
     * Follow it with {@link #bulkProgress}; cancel it with {@link #cancel}; it never acts on itself. The
     * bulk jobs are {@code list(InstanceFilter.builder().queue(BULK_QUEUE).build(), page)}: the live ones
     * through the hot table's queue index; the settled ones filter the history newest first unless
     * {@link SearchIndex#QUEUE} is created (as a type filter would need {@link SearchIndex#TYPE}).
     * {@link dev.durable.InvalidRequestException} when the filter's statuses leave none the action applies
     * to, or for a priority out of range.
     */
    Mono<Long> startBulk(BulkRequest request);

    /**
     * Where the bulk job {@code id} stands, from its last committed chunk. {@link dev.durable.NoTargetException}
     * when no instance has that id, {@link dev.durable.InvalidRequestException} when it is not a bulk job.
     */
    Mono<BulkProgress> bulkProgress(long id);

    /**
     * Starts migrating every instance of workflow {@code type} of an older version this engine's
     * definition can migrate (its state migrations), that is not executing, to the definition's version:
     * a durable bulk job ({@link #startBulk}, action {@link BulkAction#MIGRATE}) in queue {@link #BULK_QUEUE}
     * that reads batches, migrates them in the application and writes each row back only if it is still
     * as read (a row claimed, run or signalled meanwhile is skipped: it migrates when next claimed).
     * Run the bulk queue on engines that know the type at that version; an engine that does not know
     * it fails the chunk (retried, then the job fails saying so). Emits the job's id. A row whose
     * migration throws is left as it was (its next claim fails it as a step error). Instances of
     * versions with no migration path are not touched: see {@link #failUnmigratable}.
     * {@link dev.durable.InvalidRequestException} when this engine does not know {@code type} as a
     * workflow with migrations.
     */
    Mono<Long> migrate(String type);

    /**
     * Fails every instance of workflow {@code type} still of {@code version}, not executing, when this
     * engine's definition has no migration path from that version (it is below the oldest version its
     * migrations start from): such instances are never picked, and wait until an operator decides.
     * Their parents count them off as for any other failure. Emits how many were failed.
     * {@link dev.durable.InvalidRequestException} when this engine does not know {@code type}, or can
     * run or migrate instances of {@code version}.
     */
    Mono<Long> failUnmigratable(String type, int version);

    /** How long {@link #createSearchIndexes(Set)} may build an index over a big history. */
    Duration DEFAULT_INDEX_BUILD_TIMEOUT = Duration.ofHours(1);

    /** The opt-in search indexes the history has now (valid ones only: a failed build is not counted). */
    Mono<Set<SearchIndex>> searchIndexes();

    /**
     * Creates the given opt-in search indexes of the history, each with {@code CREATE INDEX CONCURRENTLY}
     * (engines keep settling rows meanwhile), one after the other, each within {@code timeout}. Idempotent:
     * an index that exists is left alone, one left invalid by a failed or interrupted build is dropped and
     * built again. From then on every settled instance pays for them ({@link SearchIndex} says how much).
     * Run it from one place at a time (two concurrent builds of one index may fail, and then the call is
     * simply run again).
     */
    Mono<Void> createSearchIndexes(Set<SearchIndex> indexes, Duration timeout);

    default Mono<Void> createSearchIndexes(Set<SearchIndex> indexes) {
        return createSearchIndexes(indexes, DEFAULT_INDEX_BUILD_TIMEOUT);
    }

    /** Drops the given opt-in search indexes ({@code DROP INDEX CONCURRENTLY IF EXISTS}); idempotent. */
    Mono<Void> dropSearchIndexes(Set<SearchIndex> indexes);
}
