package dev.durable;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What {@link DurableEngine#health} found: up when the engine is running and its database answered
 * in time. The details say which engine (name, schema, queues), the events dropped because
 * subscribers fell behind, how many engines are live and the work due now that no live engine can
 * run. Unserved work does not make an engine down: it is the fleet's state, not this engine's.
 * Framework adapters (the Spring Boot starter's health indicators) turn it into their own type.
 *
 * @param up whether the engine is running and its database answered
 * @param details what a health endpoint shows, in a stable order
 * @param error why it is down, when a check failed (null when it is up, or only not running)
 */
public record EngineHealth(boolean up, Map<String, Object> details, @Nullable Throwable error) {

    public EngineHealth {
        details = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(details));
    }

    /** The details of one piece of unserved work, as health endpoints show it. */
    static Map<String, Object> describe(UnservedWork work) {
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

    static Map<String, Object> identity(DurableEngine engine) {
        Map<String, Object> details = new LinkedHashMap<>();
        details.put("name", engine.options().name());
        details.put("schema", engine.options().schema());
        details.put("queues", List.copyOf(new java.util.TreeSet<>(engine.options().queues().keySet())));
        details.put("eventsDropped", engine.eventsDropped());
        return details;
    }
}
