package dev.durable.limit;

import reactor.core.publisher.Mono;

/** Makes an engine's limiter when the engine starts; see {@code EngineOptions.Builder.limiter}. */
@FunctionalInterface
public interface LimiterFactory {

    Mono<Limiter> create(LimiterContext context);
}
