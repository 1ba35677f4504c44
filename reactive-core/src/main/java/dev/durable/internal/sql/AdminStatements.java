package dev.durable.internal.sql;

import dev.durable.internal.Db;

/** The admin's groups of statements, rendered once for the engine's schema; none is on a hot path. */
public record AdminStatements(ListingSql listing, StatusCountSql counts, DetailSql details, AdminActionSql actions,
        LimitUsageSql limits, SearchIndexSql searchIndexes, VersionSql versions, QueueActivitySql activity,
        SharedSecretSql secrets) {

    public static AdminStatements create(Db db, String schema) {
        Tables tables = new Tables(schema);
        return new AdminStatements(new ListingSql(db, tables), new StatusCountSql(db, tables, schema),
                new DetailSql(db, tables), new AdminActionSql(db, tables), new LimitUsageSql(db, tables),
                new SearchIndexSql(db, tables, schema), new VersionSql(db, tables), new QueueActivitySql(db, tables),
                new SharedSecretSql(db, tables));
    }
}
