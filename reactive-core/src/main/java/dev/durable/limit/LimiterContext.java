package dev.durable.limit;

import dev.durable.EngineOptions;
import dev.durable.Limits;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.Map;

/**
 * What an engine hands its limiter when it starts: its identity, its database and schema, the
 * limits it is configured with, the lease TTL, which is also how long a gate slot lives without a
 * renewal (a slot outlives its row's lease by nothing, so a crashed holder's slot and row come back
 * together), and the bound on each database call.
 */
public record LimiterContext(String origin, ConnectionFactory connectionFactory, String schema,
        Map<String, Limits.Gate> gates, Map<String, Limits.RateLimit> rateLimits, Duration slotTtl,
        Duration callTimeout) {

    public LimiterContext {
        gates = Map.copyOf(gates);
        rateLimits = Map.copyOf(rateLimits);
    }

    /** With the engine's default call timeout. */
    public LimiterContext(String origin, ConnectionFactory connectionFactory, String schema,
            Map<String, Limits.Gate> gates, Map<String, Limits.RateLimit> rateLimits, Duration slotTtl) {
        this(origin, connectionFactory, schema, gates, rateLimits, slotTtl, EngineOptions.DEFAULT_CALL_TIMEOUT);
    }
}
