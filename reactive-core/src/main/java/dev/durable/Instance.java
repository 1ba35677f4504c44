package dev.durable;

import java.time.Instant;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A snapshot of one job or workflow instance as the database holds it. State and result are the
 * stored JSON; decode them with the engine's codec ({@link DurableEngine#codec()}).
 */
public record Instance(
        long id,
        String type,
        int typeVersion,
        String queue,
        int priority,
        InstanceStatus status,
        String step,
        @Nullable String stateJson,
        @Nullable String resultJson,
        @Nullable String lastError,
        int attempt,
        int maxAttempts,
        Instant eligibleAt,
        List<String> awaitedSignals,
        @Nullable Instant awaitDeadline,
        @Nullable Long parentId,
        int childrenPending,
        @Nullable String concurrencyKey,
        @Nullable String correlationKey,
        @Nullable String claimedBy,
        @Nullable Instant leaseExpiresAt,
        boolean cancelRequested,
        Instant insertedAt,
        Instant updatedAt) {

    public Instance {
        awaitedSignals = List.copyOf(awaitedSignals);
    }
}
