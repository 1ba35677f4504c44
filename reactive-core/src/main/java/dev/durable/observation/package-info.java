/**
 * Tracing of runs with Micrometer Observation: one observation per step run, documented by
 * {@link dev.durable.observation.DurableObservation}, named by a replaceable convention; and the
 * trace context that follows an instance ({@link dev.durable.observation.TracePropagation}).
 */
@NullMarked
package dev.durable.observation;

import org.jspecify.annotations.NullMarked;
