package dev.durable.observation;

import dev.durable.observation.DurableObservation.HighCardinalityKeys;
import dev.durable.observation.DurableObservation.LowCardinalityKeys;
import io.micrometer.common.KeyValues;

/**
 * The default: observation {@code durable.step}, contextual name {@code <type> <step>}, bounded tags
 * queue, type, step and outcome, and the instance id and attempt as high-cardinality values (span
 * attributes, never metric tags).
 */
public class DefaultRunObservationConvention implements RunObservationConvention {

    public static final DefaultRunObservationConvention INSTANCE = new DefaultRunObservationConvention();

    /**
     * Not {@code durable.run}: that is the engine's own run timer, tagged queue, type and outcome.
     * Micrometer's default meter handler makes a timer of the observation's name, tagged with its
     * keys; two meters of one name with different tag keys are refused by Prometheus, which would
     * drop one of them.
     */
    public static final String NAME = "durable.step";

    @Override
    public String getName() {
        return NAME;
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
