package dev.durable.admin;

import java.util.List;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * One page of a listing, in the order it was asked for, and the cursor of the next page (null on the
 * last one). Pass the cursor to {@link PageRequest#after(String)} to read on.
 */
public record Page<T>(List<T> items, @Nullable String next) {

    public Page {
        items = List.copyOf(items);
    }

    public Optional<String> nextCursor() {
        return Optional.ofNullable(next);
    }

    public boolean hasNext() {
        return next != null;
    }
}
