package dev.durable.internal.sql;

import dev.durable.ConflictPolicy;

import dev.durable.Child;
import dev.durable.InstanceStatus;
import dev.durable.Signal;
import dev.durable.limit.GateSlot;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import io.r2dbc.spi.Readable;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/** The shapes of rows that go into and come out of Durable's statements. */
public final class Rows {

    private Rows() {
    }

    /**
     * One row to insert; {@code runAt} (ISO-8601) wins over {@code delayMillis}. A gated row holds
     * {@code gate} under its {@code concurrencyKey}, on one of {@code gateShards} shards drawn by the
     * insert.
     */
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
            @Nullable RateSlot rate,
            @Nullable WindowSlot window,
            @Nullable String fairnessKey,
            ConflictPolicy onConflict,
            @Nullable String traceContext) {

        /** The same row under another conflict policy. */
        public NewInstance withOnConflict(ConflictPolicy policy) {
            return new NewInstance(type, typeVersion, queue, priority, step, stateJson, maxAttempts, runAt, delayMillis,
                    parentId, concurrencyKey, correlationKey, occupiedStatuses, gate, gateShards, rate, window,
                    fairnessKey, policy, traceContext);
        }

        /** Whether the row goes in under a policy other than reject (skip, replace, debounce). */
        public boolean hasPolicy() {
            return onConflict.kind() != ConflictPolicy.Kind.REJECT;
        }

        /** Whether the row's policy may change a live holder (replace, debounce). */
        public boolean changesHolder() {
            ConflictPolicy.Kind kind = onConflict.kind();
            return kind == ConflictPolicy.Kind.REPLACE || kind == ConflictPolicy.Kind.DEBOUNCE;
        }

        /** Whether a gate, a rate limit or a window admits this row. */
        public boolean limited() {
            return gate != null || rate != null || window != null;
        }
    }

    /**
     * A row claimed by {@code worker} (by a pick, or by the insert that created it), with what its
     * run needs. {@code attempt} is the attempt the claim took and {@code claimXid} the transaction
     * that took it (0: none recorded, a row claimed as it was inserted): every outcome of the run is
     * guarded by both and by the worker, since a step's attempts restart at each transition and one
     * worker can claim a row again at the attempt it had before. A gated row's {@code gate} slot is
     * keyed by its {@code concurrencyKey}.
     */
    public record ClaimedRow(
            long id,
            String worker,
            String type,
            int typeVersion,
            String queue,
            int priority,
            long eligibleMicros,
            String step,
            @Nullable String stateJson,
            int attempt,
            long claimXid,
            int maxAttempts,
            @Nullable String concurrencyKey,
            @Nullable Long parentId,
            List<String> awaitedSignals,
            List<Signal> inbox,
            List<Child> children,
            @Nullable GateSlot gate,
            @Nullable RateSlot rate,
            @Nullable WindowSlot window,
            @Nullable String traceContext,
            @Nullable String traceLast,
            Map<Long, String> signalTraces) {

        public ClaimedRow {
            awaitedSignals = List.copyOf(awaitedSignals);
            inbox = List.copyOf(inbox);
            children = List.copyOf(children);
            signalTraces = Map.copyOf(signalTraces);
        }

        /**
         * A claim with no window slot, no stored trace context and no claiming transaction (tests and
         * benchmarks build these for rows they write as executing).
         */
        public ClaimedRow(long id, String worker, String type, int typeVersion, String queue, int priority,
                long eligibleMicros, String step, @Nullable String stateJson, int attempt, int maxAttempts,
                @Nullable String concurrencyKey, @Nullable Long parentId, List<String> awaitedSignals,
                List<Signal> inbox, List<Child> children, @Nullable GateSlot gate, @Nullable RateSlot rate) {
            this(id, worker, type, typeVersion, queue, priority, eligibleMicros, step, stateJson, attempt, 0,
                    maxAttempts, concurrencyKey, parentId, awaitedSignals, inbox, children, gate, rate, null, null, null,
                    Map.of());
        }

        /**
         * The same claim going on inline with {@code step}: what the commit of an inline {@code next}
         * left on the row (attempt 1 of the new step, the key it now holds, its gate, rate and window
         * slots kept or left), the inbox less the signals that commit consumed, and the span context
         * of the run that went on ({@code traceLast}: the next run links to it).
         */
        public ClaimedRow continuedAs(String step, @Nullable String stateJson, @Nullable String concurrencyKey,
                boolean keepsGate, boolean keepsRateLimit, boolean keepsWindow, List<Signal> inbox,
                @Nullable String traceLast) {
            return new ClaimedRow(id, worker, type, typeVersion, queue, priority, eligibleMicros, step, stateJson,
                    1, claimXid, maxAttempts, concurrencyKey, parentId, List.of(), inbox, List.of(),
                    keepsGate ? gate : null, keepsRateLimit ? rate : null, keepsWindow ? window : null, traceContext,
                    traceLast, signalTraces);
        }

        /** The same claim after a migration wrote {@code typeVersion}, {@code step} and {@code stateJson} onto its row. */
        public ClaimedRow migratedTo(int typeVersion, String step, @Nullable String stateJson) {
            return new ClaimedRow(id, worker, type, typeVersion, queue, priority, eligibleMicros, step, stateJson,
                    attempt, claimXid, maxAttempts, concurrencyKey, parentId, awaitedSignals, inbox, children, gate, rate, window,
                    traceContext, traceLast, signalTraces);
        }
    }

    /** A row a pick locked but has not claimed yet, with its limits, for the limiter to admit. */
    public record Candidate(long id, String type, int priority, long eligibleMicros, @Nullable GateSlot gate,
            @Nullable RateSlot rate, @Nullable WindowSlot window) {

        public boolean limited() {
            return gate != null || rate != null || window != null;
        }
    }

    /**
     * A row whose status a statement changed, with its queue (to poke it), new status and, where
     * the statement returns it, its type (for the events the change makes).
     */
    public record Transition(long id, String queue, InstanceStatus status, @Nullable String type) {

        public Transition(long id, String queue, InstanceStatus status) {
            this(id, queue, status, null);
        }

        private static final ColumnPositions POSITIONS = new ColumnPositions("id", "queue", "status", "type");

        /** From a statement returning {@code id, queue, status} and perhaps {@code type}. */
        static Transition read(Readable readable) {
            ColumnPositions.Values row = POSITIONS.of(readable);
            return new Transition(row.get(0, Long.class), row.get(1, String.class),
                    InstanceStatus.fromSql(row.get(2, String.class)), row.has(3) ? row.get(3, String.class) : null);
        }
    }

    /** What a signal delivery found: the target, and what it did (nothing stored when its inbox was full). */
    public record Delivery(long id, String queue, String type, boolean stored, boolean woken, boolean inboxFull) {
    }

    /** What a cancel found and left, and the descendants it cancelled with it (a cascade). */
    public record CancelRow(InstanceStatus before, @Nullable InstanceStatus after, String queue, String type,
            List<Descendant> descendantsCancelled) {

        /** A descendant the cascade settled cancelled (one still executing is only asked to stop). */
        public record Descendant(long id, String queue, String type) {
        }
    }
}
