package dev.durable.redis;

import java.util.Set;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * This node's membership of a group of nodes registered in Redis, and the group's node set as it
 * changes: a membership source for the sync scheduler.
 *
 * <p>A node registers with a TTL and re-registers every heartbeat; {@link #close()} deregisters it at
 * once; a node that stops heartbeating (crashed, cut off from Redis) drops out within its TTL. Expiry
 * is judged by the Redis server's clock, so the nodes' clocks need not agree. The registry is one
 * hash-tagged key per group ({@code {durable:members:<group>}}), so it works on Redis Cluster. Join
 * with {@link RedisMemberships#join}.
 *
 * <pre>{@code
 * RedisMembership membership = RedisMemberships.join(RedisURI.create("redis://cache:6379"),
 *         RedisMembershipOptions.builder("replicas", "node-a").build()).block();
 * membership.members().subscribe(nodes -> ..., error -> ...);
 * }</pre>
 */
public interface RedisMembership {

    String group();

    String nodeId();

    /**
     * The group's node set (this node included while it is registered): the current set first, then
     * each new set when it changes, read every poll interval. Shared between subscribers; a late one
     * gets the latest set at once. While Redis is down no new set is emitted.
     */
    Flux<Set<String>> members();

    /** Stops heartbeating and deregisters at once; idempotent. */
    Mono<Void> close();

}
