package dev.durable.spring;

import dev.durable.EngineOptions;

/**
 * A bean that adjusts the engine's options after the {@code durable.*} properties are applied, for
 * what properties cannot carry: the options whose values are objects (a codec, the handler
 * scheduler, an observation convention, a limiter or poke transport factory), gates, rate limits,
 * windows and a queue's fairness. Every other engine and queue option is a property
 * ({@link DurableProperties}). Called in {@link org.springframework.core.annotation.Order} order.
 */
@FunctionalInterface
public interface DurableEngineCustomizer {

    void customize(EngineOptions.Builder options);
}
