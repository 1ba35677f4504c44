package dev.durable.sync;

/** One pull target: a partner and a shard. */
public record SyncTarget(String partner, int shard) {

    @Override
    public String toString() {
        return "(" + partner + ", " + shard + ")";
    }
}
