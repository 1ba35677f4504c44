package dev.durable.spring.boot3;

import dev.durable.DurableEngine;
import java.time.Duration;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.ReactiveHealthIndicator;
import reactor.core.publisher.Mono;

/**
 * The engine's health ({@link DurableEngine#health}) as Spring Boot 3's {@code durable} indicator:
 * the same status and details as the starter's Boot 4 indicator.
 */
public final class Boot3DurableHealthIndicator implements ReactiveHealthIndicator {

    private final DurableEngine engine;
    private final Duration timeout;

    public Boot3DurableHealthIndicator(DurableEngine engine, Duration timeout) {
        this.engine = engine;
        this.timeout = timeout;
    }

    @Override
    public Mono<Health> health() {
        return engine.health(timeout).map(health -> (health.error() != null ? Health.down(health.error())
                        : health.up() ? Health.up() : Health.down())
                .withDetails(health.details())
                .build());
    }
}
