/** The client API under load: shared settle-waiters, the insert batcher. */
@NullMarked
package dev.durable.benchmarks.client;

import org.jspecify.annotations.NullMarked;
