/** Durable's Redis module: Lettuce-based transports and coordination for engines sharing a database. */
@NullMarked
package dev.durable.redis;

import org.jspecify.annotations.NullMarked;
