package dev.durable.internal.sql;

import dev.durable.Limits;
import dev.durable.internal.Db;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/** Every group of statements of one engine, rendered once for its schema and limits. */
public record Statements(Db db, InstanceSql instances, InsertSql inserts, PolicyInsertSql policyInserts,
        PickSql picks, OutcomeSql outcomes, LeaseSql leases, SignalSql signals, MaintenanceSql maintenance,
        RegistrySql registry, QueueActivitySql activity) {

    /** The statements of an engine that knows these limits, and these types at these versions. */
    public static Statements create(Db db, String schema, Collection<Limits.Gate> gates,
            Collection<Limits.RateLimit> rateLimits, Map<String, Integer> knownTypes, int maxInboxSignals) {
        return create(db, schema, gates, rateLimits, List.of(), knownTypes, Map.of(), maxInboxSignals, false);
    }

    /**
     * As above, with the sliding windows a row's rate slot may name, each known type run down to its
     * lowest version in {@code lowestVersions} (1 when absent); {@code traced}: the commits store each
     * run's span context (EngineOptions.tracePropagation).
     */
    public static Statements create(Db db, String schema, Collection<Limits.Gate> gates,
            Collection<Limits.RateLimit> rateLimits, Collection<Limits.Window> windows, Map<String, Integer> knownTypes,
            Map<String, Integer> lowestVersions, int maxInboxSignals, boolean traced) {
        Tables tables = new Tables(schema);
        return new Statements(db, new InstanceSql(db, tables), new InsertSql(db, tables),
                new PolicyInsertSql(db, tables),
                new PickSql(db, tables, gates, rateLimits, windows, knownTypes, lowestVersions),
                new OutcomeSql(tables, traced), new LeaseSql(db, tables), new SignalSql(db, tables, maxInboxSignals),
                new MaintenanceSql(db, tables), new RegistrySql(db, tables), new QueueActivitySql(db, tables));
    }
}
