package dev.durable.sync;

import reactor.core.publisher.Mono;

/**
 * The boundary between scheduling and the sync protocol: starts one pull of {@code shard} from
 * {@code partner}. It should hand the work off (send a request, enqueue a job) and complete
 * promptly; an error, a thrown exception or the pull timeout counts as a failed pull of that
 * partner and shard, and never stops the other pulls or the next tick.
 */
@FunctionalInterface
public interface SyncPullTrigger {

    Mono<Void> trigger(String partner, int shard);

    /** A trigger that does nothing, for wiring where the protocol comes later. */
    static SyncPullTrigger noop() {
        return (partner, shard) -> Mono.empty();
    }
}
