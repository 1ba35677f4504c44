package dev.durable.internal.sql;

import dev.durable.InstanceStatus;
import dev.durable.Outcome.FairnessChange;
import dev.durable.Outcome.KeyChange;
import dev.durable.Outcome.RateChange;
import dev.durable.Outcome.WindowChange;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * An outcome to commit, always built from the claim it answers: the commit is guarded by the
 * claim's worker, attempt and transaction, so a run of an earlier claim can never commit under a
 * newer one. There is one factory per kind of outcome and no public constructor, so no outcome is half built.
 *
 * <p>Null {@code step}, {@code stateJson}, {@code error} and {@code attempt} keep what the row
 * has; a null {@code delayMillis} keeps its eligible time. The riders: signals the step consumed,
 * children to insert, and the parent to count off when this settles a child.
 */
public final class OutcomeRow {

    /**
     * What a transition does to the row's concurrency key, gate (the next step's gate {@code gate} of
     * {@code gateShards} shards under {@code concurrencyKey}, with GATE), rate slot ({@code rate}, with
     * SET), window slot ({@code window}, with SET) and fairness key ({@code fairnessKey}: the key the
     * row moves to, resolved; null with KEEP, or a CLEAR on a queue without fairness).
     */
    public record LimitChange(KeyChange keyChange, @Nullable String concurrencyKey, @Nullable String gate,
            int gateShards, RateChange rateChange, @Nullable RateSlot rate, WindowChange windowChange,
            @Nullable WindowSlot window, FairnessChange fairnessChange, @Nullable String fairnessKey) {

        /** The row keeps its key, gate, rate limit, window and fairness key. */
        public static final LimitChange NONE = new LimitChange(KeyChange.KEEP, null, null, 0, RateChange.KEEP, null,
                WindowChange.KEEP, null);

        /** A change of key, gate, rate limit and window that keeps the fairness key. */
        public LimitChange(KeyChange keyChange, @Nullable String concurrencyKey, @Nullable String gate,
                int gateShards, RateChange rateChange, @Nullable RateSlot rate, WindowChange windowChange,
                @Nullable WindowSlot window) {
            this(keyChange, concurrencyKey, gate, gateShards, rateChange, rate, windowChange, window,
                    FairnessChange.KEEP, null);
        }

        /** This change, moving the row to fairness key {@code key} too (resolved: CLEAR's is the queue's default). */
        public LimitChange withFairness(FairnessChange change, @Nullable String key) {
            return new LimitChange(keyChange, concurrencyKey, gate, gateShards, rateChange, rate, windowChange, window,
                    change, key);
        }

        /** This change, holding gate {@code gate} under {@code key} from the next step on. */
        public LimitChange withGate(String gate, String key, int shards) {
            return new LimitChange(KeyChange.GATE, key, gate, shards, rateChange, rate, windowChange, window,
                    fairnessChange, fairnessKey);
        }
    }

    private final ClaimedRow claim;
    private final InstanceStatus status;
    private final @Nullable String step;
    private final @Nullable String stateJson;
    private final @Nullable String resultJson;
    private final @Nullable String error;
    private final @Nullable Long delayMillis;
    private final @Nullable Integer attempt;
    private final long leaseMillis;
    private final @Nullable String awaitedSignals;
    private final @Nullable Long awaitMillis;
    private final LimitChange limitChange;
    private final List<Long> consumedSignals;
    private final List<NewInstance> children;
    /** The span context of the run that decided this (stored as the row's trace_last); null without tracing. */
    private final @Nullable String traceLast;

    private OutcomeRow(ClaimedRow claim, InstanceStatus status, @Nullable String step, @Nullable String stateJson,
            @Nullable String resultJson, @Nullable String error, @Nullable Long delayMillis, @Nullable Integer attempt,
            long leaseMillis, @Nullable String awaitedSignals, @Nullable Long awaitMillis, LimitChange limitChange,
            List<Long> consumedSignals, List<NewInstance> children) {
        this.claim = claim;
        this.status = status;
        this.step = step;
        this.stateJson = stateJson;
        this.resultJson = resultJson;
        this.error = error;
        this.delayMillis = delayMillis;
        this.attempt = attempt;
        this.leaseMillis = leaseMillis;
        this.awaitedSignals = awaitedSignals;
        this.awaitMillis = awaitMillis;
        this.limitChange = limitChange;
        this.consumedSignals = List.copyOf(consumedSignals);
        this.children = List.copyOf(children);
        this.traceLast = null;
    }

    private OutcomeRow(OutcomeRow outcome, @Nullable String traceLast) {
        this.claim = outcome.claim;
        this.status = outcome.status;
        this.step = outcome.step;
        this.stateJson = outcome.stateJson;
        this.resultJson = outcome.resultJson;
        this.error = outcome.error;
        this.delayMillis = outcome.delayMillis;
        this.attempt = outcome.attempt;
        this.leaseMillis = outcome.leaseMillis;
        this.awaitedSignals = outcome.awaitedSignals;
        this.awaitMillis = outcome.awaitMillis;
        this.limitChange = outcome.limitChange;
        this.consumedSignals = outcome.consumedSignals;
        this.children = outcome.children;
        this.traceLast = traceLast;
    }

    /** This outcome, decided by a run whose span context is {@code traceLast} (the next attempt links to it). */
    public OutcomeRow tracedBy(@Nullable String traceLast) {
        return traceLast == null && this.traceLast == null ? this : new OutcomeRow(this, traceLast);
    }

    private static OutcomeRow settled(ClaimedRow claim, InstanceStatus status, @Nullable String resultJson,
            @Nullable String error, List<Long> consumed) {
        return new OutcomeRow(claim, status, null, null, resultJson, error, null, null, 0, null, null,
                LimitChange.NONE, consumed, List.of());
    }

    /** The instance is done with {@code resultJson} (null for none). */
    public static OutcomeRow done(ClaimedRow claim, @Nullable String resultJson, List<Long> consumed) {
        return settled(claim, InstanceStatus.DONE, resultJson, null, consumed);
    }

    /** The instance failed for good with {@code error}. */
    public static OutcomeRow failed(ClaimedRow claim, @Nullable String error, List<Long> consumed) {
        return settled(claim, InstanceStatus.FAILED, null, error, consumed);
    }

    /** The instance cancelled itself. */
    public static OutcomeRow cancelled(ClaimedRow claim, List<Long> consumed) {
        return settled(claim, InstanceStatus.CANCELLED, null, null, consumed);
    }

    /** The attempt failed with {@code error}: the step runs again after {@code delayMillis}. */
    public static OutcomeRow retryAfterError(ClaimedRow claim, String error, long delayMillis) {
        return new OutcomeRow(claim, InstanceStatus.RUNNABLE, null, null, null, error, delayMillis, null, 0, null,
                null, LimitChange.NONE, List.of(), List.of());
    }

    /** The step asked to run again after {@code delayMillis}, giving back the attempt its claim took. */
    public static OutcomeRow retryStep(ClaimedRow claim, long delayMillis) {
        return new OutcomeRow(claim, InstanceStatus.RUNNABLE, null, null, null, null, delayMillis,
                Math.max(claim.attempt() - 1, 0), 0, null, null, LimitChange.NONE, List.of(), List.of());
    }

    /**
     * This engine cannot run the claim (its type, version or step is unknown here: a rolling deploy
     * is under way): it goes back to the queue for an engine that can, after {@code delayMillis},
     * without spending the attempt, the reason kept as its last error.
     */
    public static OutcomeRow deferred(ClaimedRow claim, String reason, long delayMillis) {
        return new OutcomeRow(claim, InstanceStatus.RUNNABLE, null, null, null, reason, delayMillis,
                Math.max(claim.attempt() - 1, 0), 0, null, null, LimitChange.NONE, List.of(), List.of());
    }

    /** Go on with {@code step} through the queue after {@code delayMillis}, with a fresh attempt budget. */
    public static OutcomeRow next(ClaimedRow claim, String step, @Nullable String stateJson, long delayMillis,
            LimitChange change, List<Long> consumed) {
        return new OutcomeRow(claim, InstanceStatus.RUNNABLE, step, stateJson, null, null, delayMillis, 0, 0, null,
                null, change, consumed, List.of());
    }

    /** Go on with {@code step} at once on the same claim: the row stays executing, its lease renewed. */
    public static OutcomeRow inlineNext(ClaimedRow claim, String step, @Nullable String stateJson, long leaseMillis,
            LimitChange change, List<Long> consumed) {
        return new OutcomeRow(claim, InstanceStatus.EXECUTING, step, stateJson, null, null, null, 1, leaseMillis,
                null, null, change, consumed, List.of());
    }

    /** Park until one of {@code signals} (comma-separated) arrives, or {@code awaitMillis} pass. */
    public static OutcomeRow await(ClaimedRow claim, String step, @Nullable String stateJson, String signals,
            @Nullable Long awaitMillis, List<Long> consumed) {
        return new OutcomeRow(claim, InstanceStatus.AWAITING_SIGNAL, step, stateJson, null, null, null, 0, 0, signals,
                awaitMillis, LimitChange.NONE, consumed, List.of());
    }

    /** Insert {@code children} and park until they have all settled, then run {@code step}. */
    public static OutcomeRow spawn(ClaimedRow claim, String step, @Nullable String stateJson,
            List<NewInstance> children, List<Long> consumed) {
        if (children.isEmpty()) {
            return next(claim, step, stateJson, 0, LimitChange.NONE, consumed);
        }
        return new OutcomeRow(claim, InstanceStatus.AWAITING_CHILDREN, step, stateJson, null, null, null, 0, 0, null,
                null, LimitChange.NONE, consumed, children);
    }

    /** This outcome's claim failed instead, because the database refused this outcome for {@code reason}. */
    public OutcomeRow refusedBecause(String reason) {
        return failed(claim, reason, List.of()).tracedBy(traceLast);
    }

    /**
     * This inline {@code next} going through the queue instead, as a plain {@code next} due now (its
     * new key was busy elsewhere, or its bucket could not afford the step): a pick admits it.
     */
    public OutcomeRow throughQueue() {
        return new OutcomeRow(claim, InstanceStatus.RUNNABLE, step, stateJson, null, null, 0L, 0, 0, null, null,
                limitChange, consumedSignals, List.of()).tracedBy(traceLast);
    }

    /** True when committing this needs more than the one UPDATE (a transaction with riders). */
    public boolean hasRiders() {
        return status == InstanceStatus.AWAITING_SIGNAL || !consumedSignals.isEmpty() || !children.isEmpty()
                || (claim.parentId() != null && status.isTerminal());
    }

    public ClaimedRow claim() {
        return claim;
    }

    public long id() {
        return claim.id();
    }

    public String worker() {
        return claim.worker();
    }

    /** The attempt the claim took: the commit's guard, with the worker and the claiming transaction. */
    public int claimedAttempt() {
        return claim.attempt();
    }

    /** The transaction that took the claim (0: none recorded): the commit's guard, with worker and attempt. */
    public long claimXid() {
        return claim.claimXid();
    }

    public @Nullable Long parentId() {
        return claim.parentId();
    }

    public InstanceStatus status() {
        return status;
    }

    public @Nullable String step() {
        return step;
    }

    public @Nullable String stateJson() {
        return stateJson;
    }

    public @Nullable String resultJson() {
        return resultJson;
    }

    public @Nullable String error() {
        return error;
    }

    public @Nullable Long delayMillis() {
        return delayMillis;
    }

    public @Nullable Integer attempt() {
        return attempt;
    }

    public long leaseMillis() {
        return leaseMillis;
    }

    public @Nullable String awaitedSignals() {
        return awaitedSignals;
    }

    public @Nullable Long awaitMillis() {
        return awaitMillis;
    }

    public LimitChange limitChange() {
        return limitChange;
    }

    public List<Long> consumedSignals() {
        return consumedSignals;
    }

    public List<NewInstance> children() {
        return children;
    }

    public @Nullable String traceLast() {
        return traceLast;
    }

    @Override
    public String toString() {
        return "OutcomeRow{id=" + id() + ", status=" + status + ", claimedAttempt=" + claimedAttempt() + "}";
    }
}
