package dev.durable.redis;

import dev.durable.poke.PokeTransport;

/**
 * Pokes between engines over Redis pub/sub (see {@link RedisPokeTransports}). Beyond the
 * {@link PokeTransport} contract it reports what it sent, received and ignored, for tests and
 * metrics.
 */
public interface RedisPokeTransport extends PokeTransport {

    /** The pub/sub channel this engine listens and publishes on. */
    String channel();

    /** A snapshot of the counters. */
    Stats stats();

    /**
     * Counters since start.
     *
     * @param published messages published (after coalescing)
     * @param received messages from other engines, delivered to this engine's schedulers
     * @param echoesIgnored this engine's own messages coming back, ignored
     * @param notSent pokes that could not be published (Redis down); they are sent again once
     *     Redis is back, and polling finds the work meanwhile
     */
    record Stats(long published, long received, long echoesIgnored, long notSent) {
    }
}
