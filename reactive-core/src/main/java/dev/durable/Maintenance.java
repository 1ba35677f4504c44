package dev.durable;

import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
import java.time.Duration;
import reactor.core.publisher.Mono;

/**
 * An engine's maintenance tasks: the reaper, the expiry of await deadlines, the garbage collection
 * of settled instances, the healing of limiter counters, the sweep of idle rate-limit buckets, the
 * healing of fair keys, the retry of key elections that gave up on a held lock and the healing of
 * keys left without a head, the analyzer of the hot tables' planner statistics and their vacuumer.
 *
 * <p>Each task is its own service with its own {@link TaskOptions} (switch, tick, batch size, time
 * budget, bound of one batch): on each tick it runs one <em>pass</em>, batch after batch while each
 * batch comes back full and the budget lasts, so it keeps up with the engine's throughput instead of
 * taking a fixed number of rows per tick. A failing or stalled task costs its own pass only.
 * {@link EngineOptions.Builder#runMaintenance(boolean) runMaintenance(false)} switches every tick off.
 *
 * <p>The methods below run one pass now (a tool, a test, an operator's button), whether or not the
 * task's tick is switched on, on any engine that started. Every task is safe on any number of nodes
 * at once: each batch locks the rows it takes and skips rows another node holds.
 */
public interface Maintenance {

    /**
     * One reaper pass: expired leases go back to runnable after the type's backoff for the attempt
     * that was lost (to failed past max attempts, to cancelled when a cancel was requested); parents
     * that a failed child woke are poked. Emits how many claims it recovered.
     */
    Mono<Long> reap();

    /** One pass over parked instances whose await deadline passed: they resume; emits how many. */
    Mono<Long> expireAwaits();

    /** One pass of deleting settled instances past the retention (children of live parents spared); emits how many. */
    Mono<Long> collectGarbage();

    /** Has the limiter heal its counters (PostgreSQL: recount gate counters); emits how many were wrong. */
    Mono<Long> reconcileLimits();

    /**
     * One pass of deleting rate-limit buckets that have been full again for a while: a missing
     * bucket is a full one, so no admission changes. Emits how many it deleted.
     */
    Mono<Long> sweepBuckets();

    /**
     * One pass of healing the fair keys of the queues this engine runs fair: keyless runnable rows
     * (queued before the queue was fair) get the empty key, once per engine start, and keys parked
     * while a row of theirs was still uncommitted are woken. Emits how many keys it woke.
     */
    Mono<Long> healFairKeys();

    /**
     * One pass of healing concurrency keys whose runnable rows wait behind no head (an election on
     * an older snapshot, in a REPEATABLE READ or SERIALIZABLE transaction, can miss a row that
     * committed meanwhile; an election that gave up waiting for a key's lock another transaction
     * held writes its key down): each such key, with no row executing, elects its head as its
     * triggers would. Emits how many keys it elected a head for.
     */
    Mono<Long> healKeys();

    /**
     * One pass of the analyzer: ANALYZEs each of the tables the hot statements plan over (instances,
     * inbox, fair keys, gate slots, permits) that holds at least a thousand live rows and more than
     * twice what its planner statistics say, so the generic plans the engine's prepared statements
     * keep are made again for its size (a plan made while the table looked empty scans it). A table
     * this role may not ANALYZE is reported once and skipped. Emits how many tables it analyzed.
     */
    Mono<Long> analyze();

    /**
     * One pass of the vacuumer: VACUUMs each hot table (instances, inbox, fair keys, gate slots,
     * permits) holding ten thousand dead rows or more, so the picks and claims do not step over the
     * dead versions a busy queue leaves until autovacuum's next visit. A table this role may not
     * VACUUM is reported once and skipped. Emits how many tables it vacuumed.
     */
    Mono<Long> vacuum();

    /** What this engine's maintenance did so far, by its ticks and by the calls above. */
    MaintenanceStats stats();

    /**
     * Counters of an engine's maintenance since it started.
     *
     * @param reaped expired leases the reaper recovered
     * @param awaitsExpired parked instances resumed at their deadline
     * @param collected settled instances deleted
     * @param limitsHealed limiter counters found wrong and healed
     * @param bucketsSwept idle rate-limit buckets deleted
     * @param failures passes that failed or timed out (each is tried again on its next tick)
     */
    record MaintenanceStats(long reaped, long awaitsExpired, long collected, long limitsHealed, long bucketsSwept,
            long failures) {
    }

    /**
     * How one maintenance task runs on an engine. Immutable; each {@code with...} returns a copy.
     *
     * <ul>
     *   <li>{@code enabled}: whether the engine runs the task on its tick (one pass can always be run by hand);
     *   <li>{@code interval}: the time between two passes;
     *   <li>{@code batchSize}: the most rows one batch takes (one statement, one short transaction);
     *   <li>{@code budget}: how long one pass keeps taking batches while they come back full;
     *   <li>{@code timeout}: the bound of one batch, on the client and as the batch's statement timeout.
     * </ul>
     */
    final class TaskOptions {

        public static final int DEFAULT_BATCH_SIZE = 1000;
        public static final Duration DEFAULT_BUDGET = Duration.ofSeconds(4);
        public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(30);

        /** The parts of a task's options; an engine option of this type is set part by part from text. */
        static final OptionList<TaskOptions> OPTIONS = new OptionList<>("TaskOptions", TaskOptions::new,
                task -> task.values);

        private static final Option<Boolean> ENABLED = OPTIONS.add("enabled", Boolean.class, true, Checks.notNull(),
                "Whether the engine runs the task on its tick (one pass can always be run by hand).");
        private static final Option<Duration> INTERVAL = OPTIONS.add("interval", Duration.class, null,
                Checks.positive(), "The time between two passes.");
        private static final Option<Integer> BATCH_SIZE = OPTIONS.add("batchSize", Integer.class, DEFAULT_BATCH_SIZE,
                Checks.atLeast(1), "The most rows one batch takes (one statement, one short transaction).");
        private static final Option<Duration> BUDGET = OPTIONS.add("budget", Duration.class, DEFAULT_BUDGET,
                Checks.positive(), "How long one pass keeps taking batches while they come back full.");
        private static final Option<Duration> TIMEOUT = OPTIONS.add("timeout", Duration.class, DEFAULT_TIMEOUT,
                Checks.positive(), "The bound of one batch, on the client and as the batch's statement timeout.");

        private final OptionValues values;

        private TaskOptions(OptionValues values) {
            this.values = values;
        }

        /** A task switched on, a pass every {@code interval}, with the default batch size, budget and timeout. */
        public static TaskOptions every(Duration interval) {
            return new TaskOptions(OptionValues.none().with(INTERVAL, interval));
        }

        /** The parts of a task's options, with their defaults, rules and descriptions. */
        public static OptionList<TaskOptions> options() {
            return OPTIONS;
        }

        public boolean enabled() {
            return values.get(ENABLED);
        }

        public Duration interval() {
            return values.get(INTERVAL);
        }

        public int batchSize() {
            return values.get(BATCH_SIZE);
        }

        public Duration budget() {
            return values.get(BUDGET);
        }

        public Duration timeout() {
            return values.get(TIMEOUT);
        }

        public TaskOptions withEnabled(boolean enabled) {
            return OPTIONS.with(this, ENABLED, enabled);
        }

        /** The same task, not run on a tick by this engine. */
        public TaskOptions disabled() {
            return withEnabled(false);
        }

        public TaskOptions withInterval(Duration interval) {
            return OPTIONS.with(this, INTERVAL, interval);
        }

        public TaskOptions withBatchSize(int batchSize) {
            return OPTIONS.with(this, BATCH_SIZE, batchSize);
        }

        public TaskOptions withBudget(Duration budget) {
            return OPTIONS.with(this, BUDGET, budget);
        }

        public TaskOptions withTimeout(Duration timeout) {
            return OPTIONS.with(this, TIMEOUT, timeout);
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof TaskOptions that && values.equals(that.values);
        }

        @Override
        public int hashCode() {
            return values.hashCode();
        }

        @Override
        public String toString() {
            return (enabled() ? "every " + interval() : "off") + " (batch " + batchSize() + ", budget " + budget()
                    + ", timeout " + timeout() + ")";
        }
    }
}
