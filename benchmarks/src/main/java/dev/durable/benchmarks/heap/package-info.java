/** The engine's heap against the depth of its queue: bounded by concurrency and prefetch, not the backlog. */
@NullMarked
package dev.durable.benchmarks.heap;

import org.jspecify.annotations.NullMarked;
