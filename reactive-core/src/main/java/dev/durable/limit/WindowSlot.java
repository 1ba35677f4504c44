package dev.durable.limit;

import org.jspecify.annotations.Nullable;

/**
 * A row's window slot: {@code weight} of sliding window {@code name}, counted on {@code partition}
 * (null: the window's one shared partition).
 *
 * <p>A value, checked only for what makes it a value: the rules of the window it names (a known name,
 * a weight from 1 to its limit, a partition of at most {@code JobRequest.MAX_KEY_BYTES}) are checked
 * where the window is known, when the request is inserted or the outcome committed.
 */
public record WindowSlot(String name, @Nullable String partition, int weight) {

    public WindowSlot {
        if (name == null) {
            throw new IllegalArgumentException("the name of a window slot must not be null");
        }
    }

    /** The partition a limiter counts the slot on: "" for the shared one. */
    public String partitionKey() {
        return partition == null ? "" : partition;
    }
}
