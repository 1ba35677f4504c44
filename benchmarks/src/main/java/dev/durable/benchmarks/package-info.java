/** JMH micro-benchmarks of Durable's building blocks. */
@NullMarked
package dev.durable.benchmarks;

import org.jspecify.annotations.NullMarked;
