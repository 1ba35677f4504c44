/**
 * Limiters: who admits rows of named gates and rate limits, who counts the slots they hold and
 * who gives them back. The default, {@link dev.durable.limit.PostgresLimiter}, does it all inside
 * the pick statement and a trigger; a lease-native one (Redis) plugs in through {@link
 * dev.durable.limit.Limiter} and the engine then asks it around the pick.
 */
@NullMarked
package dev.durable.limit;

import org.jspecify.annotations.NullMarked;
