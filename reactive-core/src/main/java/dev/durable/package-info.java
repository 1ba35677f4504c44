/**
 * Durable: reactive, non-blocking durable jobs and workflows on PostgreSQL.
 *
 * <p>Start with {@link dev.durable.DurableEngine}: it applies the schema, runs the queues' schedulers
 * and is the client that inserts, queries and cancels instances.
 */
@NullMarked
package dev.durable;

import org.jspecify.annotations.NullMarked;
