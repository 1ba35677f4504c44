package dev.durable.observation;

import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationConvention;

/** Names and tags the observation of a run; implement it to replace the default. */
public interface RunObservationConvention extends ObservationConvention<RunContext> {

    @Override
    default boolean supportsContext(Observation.Context context) {
        return context instanceof RunContext;
    }
}
