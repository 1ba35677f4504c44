package dev.durable.admin;

import org.jspecify.annotations.Nullable;

/**
 * One partition of a sliding window of the PostgreSQL limiter ({@link DurableAdmin#limits()}).
 *
 * @param window the window's name
 * @param partition its partition ("" for none)
 * @param used what its live slots counted (the last window's length, by the database clock)
 * @param limit the limit this engine configures for the window, null when it knows none of that name
 */
public record WindowUsage(String window, String partition, int used, @Nullable Integer limit) {
}
