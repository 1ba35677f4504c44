package dev.durable.spring;

import dev.durable.DurableEngine;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.ReactiveHealthIndicator;
import reactor.core.publisher.Mono;

/**
 * Health of the engine ({@code durable} in the health endpoint): down unless the engine is started
 * and its database answers a primary-key lookup within the timeout. Details: name, schema, queues
 * and the events dropped because subscribers fell behind.
 */
public final class DurableHealthIndicator implements ReactiveHealthIndicator {

    /** No instance has id 0 (ids start at 1): the lookup touches the index and finds nothing. */
    private static final long PROBE_ID = 0L;

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
        if (!lifecycle.isRunning()) {
            return Mono.just(details(Health.down()).withDetail("engine", "not running").build());
        }
        return engine.get(PROBE_ID)
                .hasElement()
                .timeout(timeout, Mono.error(() -> new TimeoutException(
                        "the database did not answer within " + timeout)))
                .map(found -> details(Health.up()).withDetail("engine", "running").build())
                .onErrorResume(error -> Mono.just(details(Health.down(error)).withDetail("engine", "running")
                        .build()));
    }

    private Health.Builder details(Health.Builder builder) {
        return builder.withDetail("name", engine.options().name())
                .withDetail("schema", engine.options().schema())
                .withDetail("queues", engine.options().queues().keySet().stream().sorted().toList())
                .withDetail("eventsDropped", engine.eventsDropped());
    }
}
