package dev.durable.internal.sql;

import dev.durable.InstanceStatus;
import java.time.Instant;
import org.jspecify.annotations.Nullable;

/** The shapes of rows that go into and come out of {@link InstanceStore}'s statements. */
public final class Rows {

    private Rows() {
    }

    /** One row to insert; {@code runAt} (ISO-8601) wins over {@code delayMillis}. */
    public record NewInstance(
            String type,
            int typeVersion,
            String queue,
            int priority,
            String step,
            @Nullable String stateJson,
            int maxAttempts,
            @Nullable String runAt,
            long delayMillis,
            @Nullable Long parentId,
            @Nullable String concurrencyKey,
            @Nullable String correlationKey,
            @Nullable String occupiedStatuses) {
    }

    /** A row a pick claimed, with what its run needs. */
    public record ClaimedRow(
            long id,
            String type,
            int typeVersion,
            String queue,
            int priority,
            Instant eligibleAt,
            String step,
            @Nullable String stateJson,
            int attempt,
            int maxAttempts,
            @Nullable String concurrencyKey,
            @Nullable Long parentId) {
    }

    /**
     * An outcome to commit. Null {@code step}, {@code stateJson} and {@code error} keep what the
     * row has; a null {@code delayMillis} keeps its eligible time; {@code leaseMillis} renews the
     * lease of an outcome that stays executing.
     */
    public record OutcomeRow(
            long id,
            String worker,
            InstanceStatus status,
            @Nullable String step,
            @Nullable String stateJson,
            @Nullable String resultJson,
            @Nullable String error,
            @Nullable Long delayMillis,
            boolean resetAttempt,
            long leaseMillis) {
    }

    /** A row whose status a statement changed, with its queue (to poke it) and new status. */
    public record Transition(long id, String queue, InstanceStatus status) {
    }

    /** What a cancel found and left. */
    public record CancelRow(InstanceStatus before, @Nullable InstanceStatus after) {
    }
}
