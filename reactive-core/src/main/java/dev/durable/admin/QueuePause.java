package dev.durable.admin;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/** A paused queue ({@link DurableAdmin#pausedQueues()}): since when, and the engine whose admin paused it. */
public record QueuePause(String queue, Instant pausedAt, @Nullable String pausedBy) {
}
