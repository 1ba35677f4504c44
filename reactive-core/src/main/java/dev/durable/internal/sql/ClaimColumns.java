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
            i.state::text AS state, i.attempt, i.max_attempts, i.concurrency_key, i.parent_id,
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

    static ClaimedRow read(Readable row) {
        String[] awaited = row.get("awaited_signals", String[].class);
        String[][] inbox = row.get("inbox", String[][].class);
        return new ClaimedRow(
                row.get("id", Long.class),
                row.get("claimed_by", String.class),
                row.get("type", String.class),
                row.get("type_version", Integer.class),
                row.get("queue", String.class),
                row.get("priority", Integer.class),
                row.get("eligible_micros", Long.class),
                row.get("step", String.class),
                row.get("state", String.class),
                row.get("attempt", Integer.class),
                row.get("max_attempts", Integer.class),
                row.get("concurrency_key", String.class),
                row.get("parent_id", Long.class),
                Arrays.asList(awaited == null ? NO_STRINGS : awaited),
                inbox(inbox),
                children(row.get("children", String[][].class)),
                gateSlot(row),
                rateSlot(row),
                windowSlot(row),
                row.get("trace_context", String.class),
                row.get("trace_last", String.class),
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

    /**
     * The gate slot of a row read with {@code gate_name, concurrency_key, gate_shard} (a claim or a
     * pick's candidate), or null.
     */
    static @Nullable GateSlot gateSlot(Readable row) {
        String gate = row.get("gate_name", String.class);
        return gate == null ? null : new GateSlot(gate, row.get("concurrency_key", String.class),
                orZero(row.get("gate_shard", Integer.class)));
    }

    /**
     * The rate slot of a row read with {@code rate_limit, rate_partition, rate_weight}, or null; the
     * shared bucket's partition, read as NULL or (a candidate's) '', is null.
     */
    static @Nullable RateSlot rateSlot(Readable row) {
        String name = row.get("rate_limit", String.class);
        return name == null ? null : new RateSlot(name, emptyAsNull(row.get("rate_partition", String.class)),
                orZero(row.get("rate_weight", Integer.class)));
    }

    /** The window slot of a row read with {@code window_name, window_partition, window_weight}, or null. */
    static @Nullable WindowSlot windowSlot(Readable row) {
        String name = row.get("window_name", String.class);
        return name == null ? null : new WindowSlot(name, emptyAsNull(row.get("window_partition", String.class)),
                orZero(row.get("window_weight", Integer.class)));
    }

    private static @Nullable String emptyAsNull(@Nullable String partition) {
        return partition == null || partition.isEmpty() ? null : partition;
    }

    static int orZero(@Nullable Integer value) {
        return value == null ? 0 : value;
    }
}
