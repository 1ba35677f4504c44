package dev.durable.admin;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/**
 * One token bucket of a rate limit in the PostgreSQL limiter ({@link DurableAdmin#limits()}): the bucket
 * of rate limit {@code limit} and partition {@code partition} ("" for none) holds {@code tokens} now,
 * refilled since {@code refilledAt} (its last admission) at the configured rate and capped at
 * {@code burst}, as the pick refills it. {@code burst} is null, and {@code tokens} as last stored, when
 * this engine does not configure the limit.
 */
public record RateBucket(String limit, String partition, double tokens, @Nullable Integer burst, Instant refilledAt) {
}
