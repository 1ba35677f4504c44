package dev.durable.spring;

import dev.durable.DurableEngine;
import dev.durable.UnservedWork;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.ReactiveHealthIndicator;
import reactor.core.publisher.Mono;

/**
 * Health of the engine ({@code durable} in the health endpoint): down unless the engine is started
 * and its database answers a primary-key lookup within the timeout. Details: name, schema, queues,
 * the events dropped because subscribers fell behind, how many engines are live, and the work due
 * now that no live engine can run ({@code unservedWork}: a queue no engine serves, a type no engine
 * knows after a rolling deploy). Unserved work does not make the engine down: it is the fleet's
 * state, not this engine's.
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
        Mono<Map<String, Object>> fleet = Mono.zip(engine.liveEngines().count(),
                        engine.unservedWork().map(DurableHealthIndicator::describe).collectList())
                .map(both -> Map.<String, Object>of("liveEngines", both.getT1(), "unservedWork", both.getT2()))
                .onErrorResume(error -> Mono.just(Map.of()));
        return engine.get(PROBE_ID)
                .hasElement()
                .then(fleet)
                .timeout(timeout, Mono.error(() -> new TimeoutException(
                        "the database did not answer within " + timeout)))
                .map(found -> details(Health.up()).withDetail("engine", "running").withDetails(found).build())
                .onErrorResume(error -> Mono.just(details(Health.down(error)).withDetail("engine", "running")
                        .build()));
    }

    private static Map<String, Object> describe(UnservedWork work) {
        Map<String, Object> entry = new LinkedHashMap<>();
        entry.put("queue", work.queue());
        if (work.type() != null) {
            entry.put("type", work.type());
            entry.put("version", work.typeVersion());
        }
        entry.put("reason", work.reason().name());
        entry.put("instances", work.instances());
        entry.put("oldestEligibleAt", work.oldestEligibleAt().toString());
        return entry;
    }

    private Health.Builder details(Health.Builder builder) {
        return builder.withDetail("name", engine.options().name())
                .withDetail("schema", engine.options().schema())
                .withDetail("queues", engine.options().queues().keySet().stream().sorted().toList())
                .withDetail("eventsDropped", engine.eventsDropped());
    }
}
