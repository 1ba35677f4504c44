package dev.durable.poke;

import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Carries pokes between the engines that share a database. A poke names a queue and means
 * "runnable work may be there now". Delivery is best effort; schedulers poll anyway.
 */
public interface PokeTransport {

    /**
     * Pokes {@code queue} on this engine at once and, where the transport reaches them, on the
     * others. Senders coalesce: a burst of pokes of one queue may go out as one message.
     */
    void poke(String queue);

    /**
     * The queues poked for this engine: its own pokes and those of other engines, but never the
     * echo of its own messages. Hot and shared by all of the engine's schedulers.
     */
    Flux<String> pokes();

    /**
     * Pokes {@code queue} when the caller's open transaction on {@code connection} commits, for
     * inserts made in the caller's own transaction. The default pokes this engine at once (a poke
     * that comes early only costs an empty pick; polling catches the row in any case).
     */
    default Mono<Void> pokeOnCommit(io.r2dbc.spi.Connection connection, String queue) {
        return Mono.fromRunnable(() -> poke(queue));
    }

    /** Stops the transport; idempotent. */
    Mono<Void> close();
}
