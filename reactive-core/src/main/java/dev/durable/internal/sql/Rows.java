package dev.durable.internal.sql;

import dev.durable.InstanceStatus;
import dev.durable.Outcome.KeyChange;
import dev.durable.Outcome.RateChange;
import java.util.List;
import org.jspecify.annotations.Nullable;

/** The shapes of rows that go into and come out of {@link InstanceStore}'s statements. */
public final class Rows {

    private Rows() {
    }

    /** One row to insert; {@code runAt} (ISO-8601) wins over {@code delayMillis}. */
    public record NewInstance(
            String type,
            int typeVersion,
            String queue,
            int priority,
            String step,
            @Nullable String stateJson,
            int maxAttempts,
            @Nullable String runAt,
            long delayMillis,
            @Nullable Long parentId,
            @Nullable String concurrencyKey,
            @Nullable String correlationKey,
            @Nullable String occupiedStatuses,
            @Nullable String gate,
            int gateShards,
            @Nullable String rateLimit,
            int rateWeight,
            @Nullable String ratePartition) {
    }

    /** A row a pick claimed, with what its run needs. */
    public record ClaimedRow(
            long id,
            String type,
            int typeVersion,
            String queue,
            int priority,
            long eligibleMicros,
            String step,
            @Nullable String stateJson,
            int attempt,
            int maxAttempts,
            @Nullable String concurrencyKey,
            @Nullable Long parentId,
            List<String> awaitedSignals,
            @Nullable String inboxJson,
            @Nullable String childrenJson,
            @Nullable String gateName,
            int gateShard,
            @Nullable String rateLimit,
            int rateWeight,
            @Nullable String ratePartition) {

        /** Whether a gate or a rate limit admits this row. */
        public boolean limited() {
            return gateName != null || rateLimit != null;
        }
    }

    /** A row a pick locked but has not claimed yet, with its limits, for the limiter to admit. */
    public record Candidate(long id, int priority, long eligibleMicros, @Nullable String gateName,
            @Nullable String concurrencyKey, int gateShard, @Nullable String rateLimit,
            @Nullable String ratePartition, int rateWeight) {

        public boolean limited() {
            return gateName != null || rateLimit != null;
        }
    }

    /**
     * An outcome to commit. Null {@code step}, {@code stateJson}, {@code error} and {@code attempt}
     * keep what the row has; a null {@code delayMillis} keeps its eligible time; {@code leaseMillis}
     * renews the lease of an outcome that stays executing (inline). The riders: signals the step
     * consumed, children to insert, and the parent to poke if this settles its last child.
     * {@code claimedAttempt} is the attempt the run's claim took: the commit is guarded by it, with
     * the worker, so a run of an earlier claim of the same worker cannot commit under a newer one.
     */
    public record OutcomeRow(
            long id,
            String worker,
            InstanceStatus status,
            @Nullable String step,
            @Nullable String stateJson,
            @Nullable String resultJson,
            @Nullable String error,
            @Nullable Long delayMillis,
            @Nullable Integer attempt,
            long leaseMillis,
            @Nullable String awaitedSignals,
            @Nullable Long awaitMillis,
            KeyChange keyChange,
            @Nullable String newConcurrencyKey,
            List<Long> consumedSignals,
            List<NewInstance> children,
            @Nullable Long parentId,
            @Nullable String newGate,
            int gateShards,
            RateChange rateChange,
            @Nullable String rateLimit,
            int rateWeight,
            @Nullable String ratePartition,
            int claimedAttempt) {

        /** An outcome that changes neither gate nor rate limit. */
        public OutcomeRow(long id, String worker, InstanceStatus status, @Nullable String step,
                @Nullable String stateJson, @Nullable String resultJson, @Nullable String error,
                @Nullable Long delayMillis, @Nullable Integer attempt, long leaseMillis,
                @Nullable String awaitedSignals, @Nullable Long awaitMillis, KeyChange keyChange,
                @Nullable String newConcurrencyKey, List<Long> consumedSignals, List<NewInstance> children,
                @Nullable Long parentId) {
            this(id, worker, status, step, stateJson, resultJson, error, delayMillis, attempt, leaseMillis,
                    awaitedSignals, awaitMillis, keyChange, newConcurrencyKey, consumedSignals, children, parentId,
                    null, 0, RateChange.KEEP, null, 1, null, 0);
        }

        /** This outcome, guarded by the attempt its claim took: a stale run of an earlier claim cannot commit. */
        public OutcomeRow claimedAt(int attempt) {
            return new OutcomeRow(id, worker, status, step, stateJson, resultJson, error, delayMillis, this.attempt,
                    leaseMillis, awaitedSignals, awaitMillis, keyChange, newConcurrencyKey, consumedSignals, children,
                    parentId, newGate, gateShards, rateChange, rateLimit, rateWeight, ratePartition, attempt);
        }

        /** True when committing this needs more than the one UPDATE (a transaction with riders). */
        public boolean hasRiders() {
            return status == InstanceStatus.AWAITING_SIGNAL || !consumedSignals.isEmpty() || !children.isEmpty()
                    || (parentId != null && status.isTerminal());
        }
    }

    /** A row whose status a statement changed, with its queue (to poke it) and new status. */
    public record Transition(long id, String queue, InstanceStatus status) {
    }

    /** What a signal delivery found: the target (null when none is live) and what it did. */
    public record Delivery(long id, String queue, boolean stored, boolean woken) {
    }

    /** What a cancel found and left. */
    public record CancelRow(InstanceStatus before, @Nullable InstanceStatus after, String queue) {
    }
}
