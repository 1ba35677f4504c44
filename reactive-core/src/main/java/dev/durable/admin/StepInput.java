package dev.durable.admin;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/**
 * The input of one step of an instance ({@link InstanceDetail#stepInputs()}): the state the step last
 * started with, from which {@link dev.durable.DurableEngine#replay} and {@link dev.durable.DurableEngine#fork}
 * start it again. Recorded as the instance leaves a step ({@code startedAt}: when that run began,
 * {@code recordedAt}: when it ended), one per step, the latest run's; {@code current} for the step the
 * instance is at now or settled at, read from its own row (its state is that step's input; {@code startedAt}
 * null, {@code recordedAt} the row's last change). A job has one step, {@code run}, whose input is its args.
 */
public record StepInput(String step, int typeVersion, @Nullable String stateJson, @Nullable Instant startedAt,
        Instant recordedAt, boolean current) {
}
