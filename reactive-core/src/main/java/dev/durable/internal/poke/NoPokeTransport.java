package dev.durable.internal.poke;

import dev.durable.poke.PokeTransport;
import io.r2dbc.spi.Connection;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** No pokes at all, not even within the engine: every scheduler finds work by its poll. */
public final class NoPokeTransport implements PokeTransport {

    @Override
    public void poke(String queue) {
    }

    @Override
    public Flux<String> pokes() {
        return Flux.never();
    }

    @Override
    public Mono<Void> pokeOnCommit(Connection connection, String queue) {
        return Mono.empty();
    }

    @Override
    public Mono<Void> close() {
        return Mono.empty();
    }

    @Override
    public String toString() {
        return "NoPokeTransport";
    }
}
