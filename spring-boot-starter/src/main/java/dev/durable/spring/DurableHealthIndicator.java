package dev.durable.spring;

import dev.durable.DurableEngine;
import dev.durable.EngineHealth;
import java.time.Duration;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.ReactiveHealthIndicator;
import reactor.core.publisher.Mono;

/**
 * Health of the engine ({@code durable} in the health endpoint; Spring Boot 4): down unless the
 * engine is started and its database answers a primary-key lookup within the timeout. Details:
 * name, schema, queues, the events dropped because subscribers fell behind, how many engines are
 * live, and the work due now that no live engine can run ({@code unservedWork}: a queue no engine
 * serves, a type no engine knows after a rolling deploy). Unserved work does not make the engine
 * down: it is the fleet's state, not this engine's. ({@link DurableEngine#health}; Boot 3 has the
 * same from {@code durable-spring-boot-starter-boot3}.)
 */
public final class DurableHealthIndicator implements ReactiveHealthIndicator {

    private final DurableEngine engine;
    private final DurableLifecycle lifecycle;
    private final Duration timeout;

    public DurableHealthIndicator(DurableEngine engine, DurableLifecycle lifecycle, Duration timeout) {
        this.engine = engine;
        this.lifecycle = lifecycle;
        this.timeout = timeout;
    }

    @Override
    public Mono<Health> health() {
        return engine.health(timeout).map(health -> {
            boolean up = health.up() && lifecycle.isRunning();
            Health.Builder builder = health.error() != null ? Health.down(health.error())
                    : up ? Health.up() : Health.down();
            builder.withDetails(health.details());
            if (!lifecycle.isRunning()) {
                builder.withDetail("engine", "not running");
            }
            return builder.build();
        });
    }

    /** For tests and tools: the engine's own view, without Boot's types. */
    Mono<EngineHealth> engineHealth() {
        return engine.health(timeout);
    }
}
