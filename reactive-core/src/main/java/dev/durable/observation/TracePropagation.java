package dev.durable.observation;

import io.micrometer.observation.Observation;
import org.jspecify.annotations.Nullable;
import reactor.util.context.ContextView;

/**
 * Carries trace context through the database: what {@code EngineOptions.tracePropagation} plugs in.
 * The engine asks it for the trace context of whoever inserts an instance or sends a signal, and of
 * each run's span (for the children and jobs a step inserts, and for the next attempt's link), and
 * stores the answer with the row in W3C form ({@link TraceContexts}). Each run's observation then
 * carries the stored context back ({@link RunContext} is a receiver context whose carrier holds
 * {@code traceparent} and {@code tracestate}), so any Micrometer Tracing bridge makes the run's
 * span a child of it; {@link DurableTracingObservationHandler} adds the links.
 *
 * <p>{@link #NONE}, the default, captures nothing: no column is written and no context is read.
 * {@link MicrometerTracePropagation} is the implementation over Micrometer Tracing.
 */
public interface TracePropagation {

    /** Captures nothing: rows carry no trace context. */
    TracePropagation NONE = new TracePropagation() {
        @Override
        public @Nullable String capture(ContextView caller) {
            return null;
        }

        @Override
        public @Nullable String capture(Observation run) {
            return null;
        }

        @Override
        public String toString() {
            return "TracePropagation.NONE";
        }
    };

    /**
     * The trace context current for a caller whose Reactor context is {@code caller} (its
     * observation under Micrometer's {@code micrometer.observation} key, else the span in scope on
     * the calling thread), as {@code <traceparent>[ <tracestate>]}; null when there is none.
     */
    @Nullable String capture(ContextView caller);

    /** The trace context of the span of a run's observation, in the same form; null when it has none. */
    @Nullable String capture(Observation run);
}
