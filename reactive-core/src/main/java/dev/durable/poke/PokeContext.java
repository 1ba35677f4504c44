package dev.durable.poke;

import io.r2dbc.spi.ConnectionFactory;

/**
 * What an engine hands its poke transport: its identity (messages carry it as their origin so an
 * engine ignores its own echo), its database and its schema.
 */
public record PokeContext(String origin, ConnectionFactory connectionFactory, String schema) {
}
