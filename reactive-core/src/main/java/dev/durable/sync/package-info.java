/**
 * The sync scheduler: periodic anti-entropy pulls for a replicated, sharded store. It owns timing
 * and target selection only; the pull itself is an injected {@link dev.durable.sync.SyncPullTrigger}.
 *
 * <p>Start with {@link dev.durable.sync.SyncSchedulerConfig} (local node, node set, an explicit
 * {@link dev.durable.sync.SyncTopology}, shard count, interval), then
 * {@link dev.durable.sync.SyncScheduler#create}. {@link dev.durable.sync.DurableSyncTrigger} turns
 * each pull into a durable job.
 */
@NullMarked
package dev.durable.sync;

import org.jspecify.annotations.NullMarked;
