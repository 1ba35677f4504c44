package dev.durable.internal.sql;

import dev.durable.admin.InstanceFilter;
import io.r2dbc.spi.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;

/**
 * A filter's conditions as SQL over one table, with its arguments numbered once for both tables.
 * Statuses come from an enum and are written as literals, so a partial index on status matches.
 */
final class FilterConditions {

    private final List<Object> args = new ArrayList<>();
    private final InstanceFilter filter;
    private final int queues;
    private final int types;
    private final int correlationKey;
    private final int prefix;
    private final int prefixEnd;
    private final int state;
    private final int error;
    private final int insertedFrom;
    private final int insertedTo;
    private final int updatedFrom;
    private final int updatedTo;
    private final int eligibleFrom;
    private final int eligibleTo;
    private final int parent;
    private final int versionFrom;
    private final int versionTo;

    FilterConditions(InstanceFilter filter) {
        this.filter = filter;
        this.queues = names(filter.queues());
        this.types = names(filter.types());
        this.correlationKey = optional(filter.correlationKey());
        String start = filter.correlationKeyPrefix();
        this.prefix = optional(start);
        this.prefixEnd = start == null ? 0 : optional(upperBound(start));
        this.state = optional(filter.stateContains());
        this.error = optional(filter.errorContains());
        this.insertedFrom = optional(filter.insertedFrom());
        this.insertedTo = optional(filter.insertedTo());
        this.updatedFrom = optional(filter.updatedFrom());
        this.updatedTo = optional(filter.updatedTo());
        this.eligibleFrom = optional(filter.eligibleFrom());
        this.eligibleTo = optional(filter.eligibleTo());
        this.parent = optional(filter.parentId());
        this.versionFrom = optional(filter.typeVersionFrom());
        this.versionTo = optional(filter.typeVersionTo());
    }

    /** Adds an argument; its 1-based placeholder number. */
    int arg(Object value) {
        args.add(value);
        return args.size();
    }

    private int optional(@Nullable Object value) {
        return value == null ? 0 : arg(value);
    }

    private int names(List<String> names) {
        if (names.isEmpty()) {
            return 0;
        }
        return names.size() == 1 ? arg(names.get(0)) : arg(names.toArray(String[]::new));
    }

    /** The conditions, each followed by AND (so a keyset condition can follow). */
    String render(boolean history) {
        StringBuilder sql = new StringBuilder();
        name(sql, "queue", queues, filter.queues());
        name(sql, "type", types, filter.types());
        if (!filter.statuses().isEmpty()) {
            sql.append("status IN (").append(filter.statuses().stream().sorted()
                    .map(s -> "'" + s.sqlName() + "'").collect(Collectors.joining(", "))).append(") AND ");
        }
        if (correlationKey > 0) {
            sql.append("correlation_key = $").append(correlationKey).append(" AND ");
        }
        if (prefix > 0) {
            // The range rides the text_pattern_ops index; starts_with is the exact test.
            sql.append("correlation_key ~>=~ $").append(prefix).append(" AND ");
            if (prefixEnd > 0) {
                sql.append("correlation_key ~<~ $").append(prefixEnd).append(" AND ");
            }
            sql.append("starts_with(correlation_key, $").append(prefix).append(") AND ");
        }
        if (state > 0) {
            sql.append("state @> $").append(state).append("::jsonb AND ");
        }
        if (error > 0) {
            sql.append("strpos(lower(last_error), lower($").append(error).append(")) > 0 AND ");
        }
        String updated = history ? "settled_at" : "updated_at";
        range(sql, "inserted_at", insertedFrom, insertedTo);
        range(sql, updated, updatedFrom, updatedTo);
        range(sql, "eligible_at", eligibleFrom, eligibleTo);
        if (parent > 0) {
            sql.append("parent_id = $").append(parent).append(" AND ");
        }
        if (versionFrom > 0) {
            sql.append("type_version >= $").append(versionFrom).append("::int AND ");
        }
        if (versionTo > 0) {
            sql.append("type_version <= $").append(versionTo).append("::int AND ");
        }
        return sql.toString();
    }

    private static void name(StringBuilder sql, String column, int index, List<String> names) {
        if (index == 0) {
            return;
        }
        sql.append(column).append(names.size() == 1 ? " = $" + index : " = ANY ($" + index + "::text[])")
                .append(" AND ");
    }

    private static void range(StringBuilder sql, String column, int from, int to) {
        if (from > 0) {
            sql.append(column).append(" >= $").append(from).append(" AND ");
        }
        if (to > 0) {
            sql.append(column).append(" < $").append(to).append(" AND ");
        }
    }

    Statement bind(Statement statement) {
        for (int i = 0; i < args.size(); i++) {
            statement.bind(i, args.get(i));
        }
        return statement;
    }

    /**
     * The least string above every string that starts with {@code prefix} in byte order (the last
     * code point plus one), or null when there is none to use (the last code point is the highest,
     * or would become a surrogate): then only the lower bound rides the index.
     */
    private static @Nullable String upperBound(String prefix) {
        int last = prefix.codePointBefore(prefix.length());
        int next = last + 1;
        if (next > Character.MAX_CODE_POINT || (next >= Character.MIN_SURROGATE && next <= Character.MAX_SURROGATE)) {
            return null;
        }
        return prefix.substring(0, prefix.length() - Character.charCount(last)) + new String(Character.toChars(next));
    }
}
