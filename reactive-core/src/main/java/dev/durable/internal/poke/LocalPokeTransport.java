package dev.durable.internal.poke;

import dev.durable.internal.SerializedEmitter;
import dev.durable.poke.PokeTransport;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** Pokes within one engine: a multicast sink its schedulers subscribe to. */
public final class LocalPokeTransport implements PokeTransport {

    private final Sinks.Many<String> sink = Sinks.many().multicast().directBestEffort();
    /** Pokes come from many threads; a subscriber with no demand drops one, which is fine: pokes are hints. */
    private final SerializedEmitter<String> emitter = new SerializedEmitter<>(sink);

    @Override
    public void poke(String queue) {
        emitter.emit(queue);
    }

    @Override
    public Flux<String> pokes() {
        return sink.asFlux();
    }

    @Override
    public Mono<Void> close() {
        return Mono.fromRunnable(emitter::complete);
    }

    @Override
    public String toString() {
        return "LocalPokeTransport";
    }
}
