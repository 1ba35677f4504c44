package dev.durable.poke;

import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;

/**
 * What an engine hands its poke transport: its identity (messages carry it as their origin so an
 * engine ignores its own echo), its database, its schema and the bound on each database call.
 */
public record PokeContext(String origin, ConnectionFactory connectionFactory, String schema, Duration callTimeout) {
}
