package dev.durable.limit;

/**
 * The gate slots live permits ({@link EngineLimits}) hold on one key of a gate, as a limiter that keeps
 * them in its own store reports them ({@link Limiter#permitSlots}): what {@code admin().limits()} adds
 * to the executing rows it counts in the database.
 *
 * @param gate the gate's name
 * @param key the concurrency key ("" for none)
 * @param slots the slots held by permits whose lease has not ended, over all shards of the key
 */
public record PermitSlots(String gate, String key, long slots) {

    public PermitSlots {
        if (gate == null || key == null) {
            throw new IllegalArgumentException("gate and key must not be null");
        }
        if (slots < 0) {
            throw new IllegalArgumentException("slots must not be negative, was " + slots);
        }
    }
}
