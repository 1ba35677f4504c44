/**
 * Tracing of runs with Micrometer Observation: one observation per step run, documented by
 * {@link dev.durable.observation.DurableObservation}, named by a replaceable convention.
 */
@NullMarked
package dev.durable.observation;

import org.jspecify.annotations.NullMarked;
