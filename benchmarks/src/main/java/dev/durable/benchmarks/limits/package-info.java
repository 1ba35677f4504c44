/** Stacked limits under saturation: admitted rate against configured, on each limiter (issue 21). */
@NullMarked
package dev.durable.benchmarks.limits;

import org.jspecify.annotations.NullMarked;
