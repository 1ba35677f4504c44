package dev.durable.admin;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/** A signal in a live instance's inbox: waiting to be consumed, or consumed at {@code consumedAt}. */
public record InboxSignal(long id, String name, @Nullable String payloadJson, @Nullable String dedupKey,
        Instant insertedAt, @Nullable Instant consumedAt) {
}
