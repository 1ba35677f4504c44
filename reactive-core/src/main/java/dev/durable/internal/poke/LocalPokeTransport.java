package dev.durable.internal.poke;

import dev.durable.poke.PokeTransport;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** Pokes within one engine: a multicast sink its schedulers subscribe to. */
public final class LocalPokeTransport implements PokeTransport {

    private final Sinks.Many<String> sink = Sinks.many().multicast().directBestEffort();

    @Override
    public void poke(String queue) {
        // Pokes come from many threads; the sink wants one emitter at a time. A subscriber with no
        // demand drops the poke, which is fine: pokes are best effort.
        synchronized (sink) {
            sink.tryEmitNext(queue);
        }
    }

    @Override
    public Flux<String> pokes() {
        return sink.asFlux();
    }

    @Override
    public Mono<Void> close() {
        return Mono.fromRunnable(() -> {
            synchronized (sink) {
                sink.tryEmitComplete();
            }
        });
    }

    @Override
    public String toString() {
        return "LocalPokeTransport";
    }
}
