package dev.durable.internal.sql;

import dev.durable.Limits;
import dev.durable.internal.Db;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/** Every group of statements of one engine, rendered once for its schema and limits. */
public record Statements(Db db, InstanceSql instances, PickSql picks, OutcomeSql outcomes, LeaseSql leases,
        SignalSql signals, MaintenanceSql maintenance, RegistrySql registry) {

    /** The statements of an engine that knows these limits, and these types at these versions. */
    public static Statements create(Db db, String schema, Collection<Limits.Gate> gates,
            Collection<Limits.RateLimit> rateLimits, Map<String, Integer> knownTypes, int maxInboxSignals) {
        return create(db, schema, gates, rateLimits, List.of(), knownTypes, maxInboxSignals);
    }

    /** As above, with the sliding windows a row's rate slot may name. */
    public static Statements create(Db db, String schema, Collection<Limits.Gate> gates,
            Collection<Limits.RateLimit> rateLimits, Collection<Limits.Window> windows, Map<String, Integer> knownTypes,
            int maxInboxSignals) {
        Tables tables = new Tables(schema);
        return new Statements(db, new InstanceSql(db, tables),
                new PickSql(db, tables, gates, rateLimits, windows, knownTypes),
                new OutcomeSql(tables), new LeaseSql(db, tables), new SignalSql(db, tables, maxInboxSignals),
                new MaintenanceSql(db, tables), new RegistrySql(db, tables));
    }
}
