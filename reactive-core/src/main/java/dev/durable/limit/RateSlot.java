package dev.durable.limit;

import org.jspecify.annotations.Nullable;

/**
 * A row's rate slot: {@code weight} tokens of token bucket {@code name}, in the bucket of
 * {@code partition} (null: the limit's one shared bucket). The slot may name a sliding window
 * instead, as rows from before stacked limits do: it is then admitted as the row's window.
 *
 * <p>A value, checked only for what makes it a value: the rules of the limit it names (a known name,
 * a weight from 1 to the burst, a partition of at most {@code JobRequest.MAX_KEY_BYTES}) are checked
 * where the limit is known, when the request is inserted or the outcome committed.
 */
public record RateSlot(String name, @Nullable String partition, int weight) {

    public RateSlot {
        if (name == null) {
            throw new IllegalArgumentException("the name of a rate slot must not be null");
        }
    }

    /** The partition a limiter counts the slot in: "" for the shared bucket. */
    public String partitionKey() {
        return partition == null ? "" : partition;
    }
}
