package dev.durable;

import org.jspecify.annotations.Nullable;

/** A child as its parent's join step sees it; decode its result with {@link StepContext#result}. */
public record Child(long id, String type, InstanceStatus status, @Nullable String resultJson,
        @Nullable String lastError) {
}
