package dev.durable.spring;

import dev.durable.EngineOptions;

/**
 * A bean that adjusts the engine's options after the {@code durable.*} properties are applied, for
 * what properties cannot carry: a codec, the handler scheduler, an observation convention. Called
 * in {@link org.springframework.core.annotation.Order} order.
 */
@FunctionalInterface
public interface DurableEngineCustomizer {

    void customize(EngineOptions.Builder options);
}
