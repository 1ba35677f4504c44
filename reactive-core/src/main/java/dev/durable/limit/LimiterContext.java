package dev.durable.limit;

import dev.durable.Limits;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.Map;

/**
 * What an engine hands its limiter when it starts: its identity, its database and schema, the
 * limits it is configured with, how long a gate slot lives without a renewal, and the bound on each
 * database call.
 *
 * <p>The engine sets the slot TTL to its lease TTL plus one heartbeat interval: a slot is taken after
 * its row's lease began and renewed on a tick of its own as often as the lease, so with that margin
 * it does not expire while the lease is live, and a crashed holder's slot still frees about when the
 * reaper can take its row back.
 */
public record LimiterContext(String origin, ConnectionFactory connectionFactory, String schema,
        Map<String, Limits.Gate> gates, Map<String, Limits.RateLimit> rateLimits, Map<String, Limits.Window> windows,
        Duration slotTtl, Duration callTimeout) {

    public LimiterContext {
        gates = Map.copyOf(gates);
        rateLimits = Map.copyOf(rateLimits);
        windows = Map.copyOf(windows);
    }
}
