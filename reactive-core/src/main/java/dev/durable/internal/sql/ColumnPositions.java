package dev.durable.internal.sql;

import io.r2dbc.spi.ColumnMetadata;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Row;
import io.r2dbc.spi.RowMetadata;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.NoSuchElementException;
import org.jspecify.annotations.Nullable;

/**
 * Where a reader's named columns sit in a result, found on a result's first row and reused for its
 * other rows. The driver reads a value by name by lower-casing the name and hashing it, for every
 * value of every row: reading what the picks claimed that way was 6 % of the engine's CPU samples at
 * saturation. One instance serves every result of a kind, on any thread: each row checks that its
 * metadata (the driver keeps one per result) is the one the positions were found in, so results
 * that alternate only find their positions again (a hash of each name, as one row read by name
 * costs), never misread.
 */
final class ColumnPositions {

    private final String[] names;
    private final String[] lowerCaseNames;
    private volatile @Nullable Found last;

    /** The columns a reader reads, by name; it then names each by its index in this list. */
    ColumnPositions(String... names) {
        this.names = names.clone();
        this.lowerCaseNames = Arrays.stream(names).map(name -> name.toLowerCase(Locale.ROOT)).toArray(String[]::new);
    }

    /** The named columns of this row, to read by their index in the names given. */
    Values of(Readable row) {
        if (!(row instanceof Row withMetadata)) {
            return new Values(row, null, names);
        }
        RowMetadata metadata = withMetadata.getMetadata();
        Found found = last;
        if (found == null || found.metadata != metadata) {
            found = new Found(metadata, positionsIn(metadata));
            last = found;
        }
        return new Values(row, found.positions, names);
    }

    /** As the driver finds a name: case-insensitively, the first column of that name. */
    private int[] positionsIn(RowMetadata metadata) {
        List<? extends ColumnMetadata> columns = metadata.getColumnMetadatas();
        Map<String, Integer> byName = new HashMap<>();
        for (int column = 0; column < columns.size(); column++) {
            byName.putIfAbsent(columns.get(column).getName().toLowerCase(Locale.ROOT), column);
        }
        int[] positions = new int[names.length];
        for (int name = 0; name < names.length; name++) {
            positions[name] = byName.getOrDefault(lowerCaseNames[name], -1);
        }
        return positions;
    }

    private record Found(RowMetadata metadata, int[] positions) {
    }

    /** One row's named columns. */
    record Values(Readable row, int @Nullable [] positions, String[] names) {

        /** The value of the column named {@code names[column]}; as the driver's read by name otherwise. */
        <T> @Nullable T get(int column, Class<T> type) {
            if (positions == null) {
                return row.get(names[column], type);
            }
            int position = positions[column];
            if (position < 0) {
                throw new NoSuchElementException("the result has no column " + names[column]);
            }
            return row.get(position, type);
        }

        /** Whether the result is known to have the column named {@code names[column]}. */
        boolean has(int column) {
            return positions != null && positions[column] >= 0;
        }
    }
}
