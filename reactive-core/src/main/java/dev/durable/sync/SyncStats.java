package dev.durable.sync;

import java.util.List;

/**
 * What one pass did.
 *
 * @param partners the local node's partners in this pass's topology, backed-off ones included
 * @param shards the shards the pass pulled for each partner
 * @param operationsTriggered the pulls started (partners not backed off, times shards)
 * @param failed how many of those failed
 * @param backedOff partners skipped this pass because they kept failing
 * @param failures each failed pull, with its partner and shard, in no particular order
 */
public record SyncStats(int partners, int shards, int operationsTriggered, int failed, int backedOff,
        List<SyncPullException> failures) {

    public SyncStats {
        failures = List.copyOf(failures);
    }

    /** The pulls that succeeded. */
    public int succeeded() {
        return operationsTriggered - failed;
    }
}
