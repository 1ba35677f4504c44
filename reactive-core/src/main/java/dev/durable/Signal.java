package dev.durable;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/** A signal in an instance's inbox; decode its payload with {@link StepContext#payload}. */
public record Signal(long id, String name, @Nullable String payloadJson, Instant deliveredAt) {
}
