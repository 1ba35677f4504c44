/**
 * A real Redis for tests and demos: the server named by {@code DURABLE_REDIS_URL} when set,
 * otherwise an embedded redis-server started once per JVM on a free port. Part of the test kit
 * ({@code dev.durable:durable-test}, which brings the embedded server); talks to it through Lettuce,
 * which {@code durable-reactive-redis} brings.
 */
@NullMarked
package dev.durable.redis.testing;

import org.jspecify.annotations.NullMarked;
