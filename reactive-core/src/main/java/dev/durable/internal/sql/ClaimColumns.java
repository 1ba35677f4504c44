package dev.durable.internal.sql;

import dev.durable.Child;
import dev.durable.InstanceStatus;
import dev.durable.Signal;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.limit.GateSlot;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import io.r2dbc.spi.Readable;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What every statement that claims returns (the picks, and the insert that claims for an idle
 * scheduler), and how it is read into a {@link ClaimedRow}.
 *
 * <p>The inbox and children come in the same statement, as two-dimensional text arrays the driver
 * decodes without JSON: the inbox only for rows that ever had a signal (never for plain jobs), at
 * most {@code EngineOptions.maxInboxSignals} unconsumed ones since deliveries stop there; the
 * children only for a claim that joins them (the step a parent parked for), not for every later
 * step of the parent; settled children are read from the history table, live ones from the
 * hot table. Times
 * travel as epoch microseconds: the driver decodes a timestamptz by parsing text, which cost a fifth
 * of the engine's CPU on a busy queue.
 */
final class ClaimColumns {

    /** The columns, over the claimed row aliased {@code i}. */
    static final String SELECT = """
            i.id, i.claimed_by, i.type, i.type_version, i.queue, i.priority,
            (extract(epoch FROM i.eligible_at) * 1000000)::bigint AS eligible_micros, i.step,
            i.state::text AS state, i.attempt, i.claim_xid, i.max_attempts, i.concurrency_key, i.parent_id,
            i.awaited_signals, i.gate_name, i.gate_shard, i.rate_limit, i.rate_weight, i.rate_partition,
            i.window_name, i.window_weight, i.window_partition,
            i.trace_context, i.trace_last,
            CASE WHEN i.has_signals THEN
                (SELECT array_agg(ARRAY[s.id::text, s.name, s.payload::text,
                                        ((extract(epoch FROM s.inserted_at) * 1000000)::bigint)::text,
                                        s.trace_context] ORDER BY s.id)
                   FROM {signals} s WHERE s.instance_id = i.id AND s.consumed_at IS NULL) END AS inbox,
            CASE WHEN i.has_children THEN
                (SELECT array_agg(ARRAY[c.id::text, c.type, c.status, c.result::text, c.last_error] ORDER BY c.id)
                   FROM (SELECT id, type, status, result, last_error FROM {instances} WHERE parent_id = i.id
                          UNION ALL
                         SELECT id, type, status, result, last_error FROM {history} WHERE parent_id = i.id) c)
            END AS children""";

    private static final String[] NO_STRINGS = new String[0];

    private ClaimColumns() {
    }

    /** The columns {@link #read} reads, in the order of the indexes below (the limits: {@link #LIMITS}). */
    private static final ColumnPositions POSITIONS = new ColumnPositions("id", "claimed_by", "type", "type_version",
            "queue", "priority", "eligible_micros", "step", "state", "attempt", "max_attempts", "concurrency_key",
            "parent_id", "awaited_signals", "inbox", "children", "trace_context", "trace_last", "claim_xid");
    private static final int ID = 0;
    private static final int CLAIMED_BY = 1;
    private static final int TYPE = 2;
    private static final int TYPE_VERSION = 3;
    private static final int QUEUE = 4;
    private static final int PRIORITY = 5;
    private static final int ELIGIBLE_MICROS = 6;
    private static final int STEP = 7;
    private static final int STATE = 8;
    private static final int ATTEMPT = 9;
    private static final int MAX_ATTEMPTS = 10;
    private static final int CONCURRENCY_KEY = 11;
    private static final int PARENT_ID = 12;
    private static final int AWAITED_SIGNALS = 13;
    private static final int INBOX = 14;
    private static final int CHILDREN = 15;
    private static final int TRACE_CONTEXT = 16;
    private static final int TRACE_LAST = 17;
    private static final int CLAIM_XID = 18;

    /** The limit slots' columns of a claimed row or a pick's candidate, in the order of the indexes below. */
    private static final ColumnPositions LIMITS = new ColumnPositions("gate_name", "concurrency_key", "gate_shard",
            "rate_limit", "rate_partition", "rate_weight", "window_name", "window_partition", "window_weight");
    private static final int GATE_NAME = 0;
    private static final int GATE_KEY = 1;
    private static final int GATE_SHARD = 2;
    private static final int RATE_LIMIT = 3;
    private static final int RATE_PARTITION = 4;
    private static final int RATE_WEIGHT = 5;
    private static final int WINDOW_NAME = 6;
    private static final int WINDOW_PARTITION = 7;
    private static final int WINDOW_WEIGHT = 8;

    static ClaimedRow read(Readable readable) {
        ColumnPositions.Values row = POSITIONS.of(readable);
        String[] awaited = row.get(AWAITED_SIGNALS, String[].class);
        String[][] inbox = row.get(INBOX, String[][].class);
        ColumnPositions.Values limits = LIMITS.of(readable);
        Long claimXid = row.get(CLAIM_XID, Long.class);
        return new ClaimedRow(
                row.get(ID, Long.class),
                row.get(CLAIMED_BY, String.class),
                row.get(TYPE, String.class),
                row.get(TYPE_VERSION, Integer.class),
                row.get(QUEUE, String.class),
                row.get(PRIORITY, Integer.class),
                row.get(ELIGIBLE_MICROS, Long.class),
                row.get(STEP, String.class),
                row.get(STATE, String.class),
                row.get(ATTEMPT, Integer.class),
                claimXid == null ? 0 : claimXid,
                row.get(MAX_ATTEMPTS, Integer.class),
                row.get(CONCURRENCY_KEY, String.class),
                row.get(PARENT_ID, Long.class),
                Arrays.asList(awaited == null ? NO_STRINGS : awaited),
                inbox(inbox),
                children(row.get(CHILDREN, String[][].class)),
                gateSlot(limits),
                rateSlot(limits),
                windowSlot(limits),
                row.get(TRACE_CONTEXT, String.class),
                row.get(TRACE_LAST, String.class),
                signalTraces(inbox));
    }

    /** The trace contexts of the inbox's signals that have one, by signal id (empty without tracing). */
    private static Map<Long, String> signalTraces(String @Nullable [][] rows) {
        if (rows == null) {
            return Map.of();
        }
        Map<Long, String> traces = null;
        for (String[] signal : rows) {
            if (signal.length > 4 && signal[4] != null) {
                if (traces == null) {
                    traces = new HashMap<>();
                }
                traces.put(Long.parseLong(signal[0]), signal[4]);
            }
        }
        return traces == null ? Map.of() : traces;
    }

    /** Rows of (id, name, payload, delivered at in epoch microseconds, trace context). */
    private static List<Signal> inbox(String @Nullable [][] rows) {
        if (rows == null) {
            return List.of();
        }
        List<Signal> signals = new ArrayList<>(rows.length);
        for (String[] signal : rows) {
            long micros = Long.parseLong(signal[3]);
            signals.add(new Signal(Long.parseLong(signal[0]), signal[1], signal[2],
                    Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000)));
        }
        return signals;
    }

    /** Rows of (id, type, status, result, last error). */
    private static List<Child> children(String @Nullable [][] rows) {
        if (rows == null) {
            return List.of();
        }
        List<Child> children = new ArrayList<>(rows.length);
        for (String[] child : rows) {
            children.add(new Child(Long.parseLong(child[0]), child[1], InstanceStatus.fromSql(child[2]), child[3],
                    child[4]));
        }
        return children;
    }

    /** The limit slots' columns of a claimed row or a pick's candidate, to read with the three below. */
    static ColumnPositions.Values limits(Readable row) {
        return LIMITS.of(row);
    }

    /** The gate slot of a row with {@code gate_name, concurrency_key, gate_shard}, or null. */
    static @Nullable GateSlot gateSlot(ColumnPositions.Values limits) {
        String gate = limits.get(GATE_NAME, String.class);
        return gate == null ? null : new GateSlot(gate, limits.get(GATE_KEY, String.class),
                orZero(limits.get(GATE_SHARD, Integer.class)));
    }

    /**
     * The rate slot of a row with {@code rate_limit, rate_partition, rate_weight}, or null; the
     * shared bucket's partition, read as NULL or (a candidate's) '', is null.
     */
    static @Nullable RateSlot rateSlot(ColumnPositions.Values limits) {
        String name = limits.get(RATE_LIMIT, String.class);
        return name == null ? null : new RateSlot(name, emptyAsNull(limits.get(RATE_PARTITION, String.class)),
                orZero(limits.get(RATE_WEIGHT, Integer.class)));
    }

    /** The window slot of a row with {@code window_name, window_partition, window_weight}, or null. */
    static @Nullable WindowSlot windowSlot(ColumnPositions.Values limits) {
        String name = limits.get(WINDOW_NAME, String.class);
        return name == null ? null : new WindowSlot(name, emptyAsNull(limits.get(WINDOW_PARTITION, String.class)),
                orZero(limits.get(WINDOW_WEIGHT, Integer.class)));
    }

    private static @Nullable String emptyAsNull(@Nullable String partition) {
        return partition == null || partition.isEmpty() ? null : partition;
    }

    static int orZero(@Nullable Integer value) {
        return value == null ? 0 : value;
    }
}
