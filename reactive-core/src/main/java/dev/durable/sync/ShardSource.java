package dev.durable.sync;

import java.util.Collection;
import java.util.List;
import reactor.core.publisher.Flux;

/**
 * Which shards a pass pulls: all of {@code 0..shardCount-1}, or only those a source reports (the
 * shards this node holds, those changed since the last pass). Asked once per pass; shards outside
 * {@code 0..shardCount-1} are ignored with a warning, repeats are dropped and the rest sorted.
 */
@FunctionalInterface
public interface ShardSource {

    Flux<Integer> shards(int shardCount);

    /** Every shard, {@code 0..shardCount-1}: the default. */
    static ShardSource all() {
        return shardCount -> Flux.range(0, shardCount);
    }

    /** Always these shards. */
    static ShardSource fixed(Collection<Integer> shards) {
        List<Integer> copy = List.copyOf(shards);
        return shardCount -> Flux.fromIterable(copy);
    }
}
