package dev.durable.internal.sql;

import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import io.r2dbc.spi.Statement;
import java.lang.reflect.Array;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * Rows sent to PostgreSQL as parallel arrays and read back with {@code unnest}. Each column is
 * declared once, with its name, SQL type and how to read it off a row, and both the statement's
 * {@code unnest(...)} list and the bindings come from that declaration, so the two cannot drift
 * (positional arrays bound by hand did, twice).
 *
 * @param <R> the row type
 */
public final class Columns<R> {

    private record Column<R>(String name, String sqlType, Class<?> javaType, Function<R, ?> value) {
    }

    private final List<Column<R>> columns;

    private Columns(List<Column<R>> columns) {
        this.columns = List.copyOf(columns);
    }

    public static <R> Builder<R> builder() {
        return new Builder<>();
    }

    /** How many parameters the columns take. */
    public int size() {
        return columns.size();
    }

    /**
     * {@code unnest($n::type[], ...) AS alias(name, ...)}, the first column at parameter
     * {@code $firstParameter}; with {@code ordinality}, a last column {@code ord} numbers the rows.
     */
    String unnest(int firstParameter, String alias, boolean ordinality) {
        StringJoiner arrays = new StringJoiner(", ", "unnest(", ")");
        StringJoiner names = new StringJoiner(", ", alias + "(", ")");
        for (int i = 0; i < columns.size(); i++) {
            arrays.add("$" + (firstParameter + i) + "::" + columns.get(i).sqlType() + "[]");
            names.add(columns.get(i).name());
        }
        if (ordinality) {
            names.add("ord");
        }
        return arrays + (ordinality ? " WITH ORDINALITY" : "") + " AS " + names;
    }

    /**
     * One row's worth of the same: {@code (VALUES ($n::type, ...)) AS alias(name, ...)}, the same
     * names as {@link #unnest}, so a statement's body reads either source; with {@code ordinality},
     * {@code ord} is 1. A single row then travels as scalars, not as one-element arrays to unnest.
     */
    String values(int firstParameter, String alias, boolean ordinality) {
        StringJoiner values = new StringJoiner(", ", "(VALUES (", ordinality ? ", 1::bigint))" : "))");
        StringJoiner names = new StringJoiner(", ", alias + "(", ")");
        for (int i = 0; i < columns.size(); i++) {
            values.add("$" + (firstParameter + i) + "::" + columns.get(i).sqlType());
            names.add(columns.get(i).name());
        }
        if (ordinality) {
            names.add("ord");
        }
        return values + " AS " + names;
    }

    /**
     * {@code sql} with each {@code alias.name} of these columns read from its array at the position of
     * the row {@code key} names ({@code key} an expression over the statement's target, e.g.
     * {@code i.id}): {@code ($n::type[])[width_bucket(key, $first::bigint[])]}. The first column
     * must be the {@code id} the rows are found by, bound sorted ascending: {@code width_bucket}
     * finds a key's place by binary search, so a statement reads its rows' values without joining
     * them to the unnested arrays (a join whose plan the statistics of the moment pick). A key not in
     * the ids lands on a wrong place: guard with {@code alias.id = key}. Fails on an {@code alias.}
     * reference that names no column.
     */
    String atPosition(String sql, String alias, String key, int firstParameter) {
        Column<R> first = columns.get(0);
        if (!first.name().equals("id") || !first.sqlType().equals("bigint")) {
            throw new IllegalStateException("positions need the sorted bigint ids first: " + first.name());
        }
        String at = "[width_bucket(" + key + ", $" + firstParameter + "::bigint[])]";
        String result = sql;
        for (int i = 0; i < columns.size(); i++) {
            Column<R> column = columns.get(i);
            result = result.replaceAll("\\b" + alias + "\\." + column.name() + "\\b", Matcher.quoteReplacement(
                    "($" + (firstParameter + i) + "::" + column.sqlType() + "[])" + at));
        }
        Matcher left = Pattern.compile("\\b" + alias + "\\.[a-z_]+").matcher(result);
        if (left.find()) {
            throw new IllegalStateException("not a column: " + left.group());
        }
        return result;
    }

    /** Binds one value per column of {@code row} for {@link #values}, the first at {@code firstIndex}. */
    Statement bindOne(Statement statement, int firstIndex, R row) {
        for (int c = 0; c < columns.size(); c++) {
            Column<R> column = columns.get(c);
            Object value = column.value().apply(row);
            if (value == null) {
                statement.bindNull(firstIndex + c, column.javaType());
            } else {
                statement.bind(firstIndex + c, value);
            }
        }
        return statement;
    }

    /** Binds one array per column, the first at bind index {@code firstIndex} (0-based). */
    Statement bind(Statement statement, int firstIndex, List<R> rows) {
        for (int c = 0; c < columns.size(); c++) {
            Column<R> column = columns.get(c);
            Object array = Array.newInstance(column.javaType(), rows.size());
            for (int r = 0; r < rows.size(); r++) {
                Array.set(array, r, column.value().apply(rows.get(r)));
            }
            statement.bind(firstIndex + c, array);
        }
        return statement;
    }

    public static final class Builder<R> {

        private final List<Column<R>> columns = new ArrayList<>();

        private Builder() {
        }

        public Builder<R> text(String name, Function<R, ? extends String> value) {
            return add(name, "text", String.class, value);
        }

        public Builder<R> integer(String name, Function<R, ? extends Integer> value) {
            return add(name, "int", Integer.class, value);
        }

        public Builder<R> bigint(String name, Function<R, ? extends Long> value) {
            return add(name, "bigint", Long.class, value);
        }

        /**
         * A row's rate slot as the columns {@code rate_limit, rate_weight, rate_partition}: null, 1 and
         * null for none (the statements store no weight without a name), the partition null for the
         * shared bucket, as the row stores it.
         */
        public Builder<R> rateSlot(Function<R, ? extends @Nullable RateSlot> slot) {
            return text("rate_limit", row -> slot.apply(row) == null ? null : slot.apply(row).name())
                    .integer("rate_weight", row -> slot.apply(row) == null ? 1 : slot.apply(row).weight())
                    .text("rate_partition", row -> slot.apply(row) == null ? null : slot.apply(row).partition());
        }

        /** A row's window slot as the columns {@code window_name, window_weight, window_partition}, as {@link #rateSlot}. */
        public Builder<R> windowSlot(Function<R, ? extends @Nullable WindowSlot> slot) {
            return text("window_name", row -> slot.apply(row) == null ? null : slot.apply(row).name())
                    .integer("window_weight", row -> slot.apply(row) == null ? 1 : slot.apply(row).weight())
                    .text("window_partition", row -> slot.apply(row) == null ? null : slot.apply(row).partition());
        }

        private Builder<R> add(String name, String sqlType, Class<?> javaType, Function<R, ?> value) {
            columns.add(new Column<>(name, sqlType, javaType, value));
            return this;
        }

        public Columns<R> build() {
            return new Columns<>(columns);
        }
    }
}
