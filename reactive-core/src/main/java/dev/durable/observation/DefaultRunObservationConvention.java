package dev.durable.observation;

import dev.durable.observation.DurableObservation.HighCardinalityKeys;
import dev.durable.observation.DurableObservation.LowCardinalityKeys;
import io.micrometer.common.KeyValues;

/**
 * The default: observation {@code durable.run}, contextual name {@code <type> <step>}, bounded tags
 * queue, type, step and outcome, and the instance id and attempt as high-cardinality values (span
 * attributes, never metric tags).
 */
public class DefaultRunObservationConvention implements RunObservationConvention {

    public static final DefaultRunObservationConvention INSTANCE = new DefaultRunObservationConvention();

    @Override
    public String getName() {
        return "durable.run";
    }

    @Override
    public String getContextualName(RunContext context) {
        return context.type() + " " + context.step();
    }

    @Override
    public KeyValues getLowCardinalityKeyValues(RunContext context) {
        return KeyValues.of(
                LowCardinalityKeys.QUEUE.withValue(context.queue()),
                LowCardinalityKeys.TYPE.withValue(context.type()),
                LowCardinalityKeys.STEP.withValue(context.step()),
                LowCardinalityKeys.OUTCOME.withValue(context.outcome() == null ? "unknown" : context.outcome()));
    }

    @Override
    public KeyValues getHighCardinalityKeyValues(RunContext context) {
        return KeyValues.of(
                HighCardinalityKeys.INSTANCE_ID.withValue(Long.toString(context.instanceId())),
                HighCardinalityKeys.ATTEMPT.withValue(Integer.toString(context.attempt())));
    }
}
