package dev.durable.poke;

import reactor.core.publisher.Mono;

/** Makes an engine's poke transport when the engine starts. */
@FunctionalInterface
public interface PokeTransportFactory {

    Mono<PokeTransport> create(PokeContext context);
}
