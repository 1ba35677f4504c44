/**
 * Limiters: who admits rows of named gates, rate limits and sliding windows, who counts the slots
 * they hold and who gives them back. A row's limits are values, its {@link dev.durable.limit.GateSlot},
 * {@link dev.durable.limit.RateSlot} and {@link dev.durable.limit.WindowSlot}, which a limiter sees as
 * one {@link dev.durable.limit.LimitClaim}. The default, {@link dev.durable.limit.PostgresLimiter},
 * does it all inside the pick statement and a trigger; a lease-native one (Redis) plugs in through
 * {@link dev.durable.limit.Limiter} and the engine then asks it around the pick.
 */
@NullMarked
package dev.durable.limit;

import org.jspecify.annotations.NullMarked;
