/**
 * A real Redis for tests and demos: the server named by {@code DURABLE_REDIS_URL} when set,
 * otherwise an embedded redis-server started once per JVM on a free port. Needs
 * {@code com.github.codemonstur:embedded-redis} and JUnit Jupiter on the test classpath.
 */
@NullMarked
package dev.durable.redis.testing;

import org.jspecify.annotations.NullMarked;
