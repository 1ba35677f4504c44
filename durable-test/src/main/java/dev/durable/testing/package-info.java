/**
 * The test kit (artifact {@code dev.durable:durable-test}, test scope): a real PostgreSQL for tests
 * and demos (the server named by {@code DURABLE_PG_URL} when set, otherwise an embedded one started
 * once per JVM; each test class gets a fresh schema), a {@link dev.durable.testing.TestClock} the
 * test moves, {@link dev.durable.testing.DurableTesting#drain drain} with a summary,
 * {@link dev.durable.testing.DurableTesting#perform perform} and assertions. Not in the engine's jar.
 */
@NullMarked
package dev.durable.testing;

import org.jspecify.annotations.NullMarked;
