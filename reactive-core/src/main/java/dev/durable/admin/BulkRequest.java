package dev.durable.admin;

import java.time.Instant;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * A bulk action over every instance a filter matches, run as a durable job ({@link DurableAdmin#startBulk}).
 * Immutable; made by {@link #retry}, {@link #cancel}, {@link #delete}, {@link #setPriority} or {@link #migrate}.
 */
public final class BulkRequest {

    /** The instances a bulk job acts on per chunk, each chunk in its own short statements. */
    public static final int DEFAULT_BATCH_SIZE = 500;

    /** The most instances a chunk may take. */
    public static final int MAX_BATCH_SIZE = 5_000;

    private final BulkAction action;
    private final InstanceFilter filter;
    private final @Nullable Integer priority;
    private final @Nullable Instant runAt;
    private final int batchSize;

    private BulkRequest(BulkAction action, InstanceFilter filter, @Nullable Integer priority, @Nullable Instant runAt,
            int batchSize) {
        this.action = action;
        this.filter = Objects.requireNonNull(filter, "filter");
        this.priority = priority;
        this.runAt = runAt;
        this.batchSize = batchSize;
    }

    /** Retry in place each failed or cancelled instance the filter matches, due now. */
    public static BulkRequest retry(InstanceFilter filter) {
        return new BulkRequest(BulkAction.RETRY, filter, null, null, DEFAULT_BATCH_SIZE);
    }

    /** Retry in place each failed or cancelled instance the filter matches, due at {@code runAt} (now when null). */
    public static BulkRequest retry(InstanceFilter filter, @Nullable Instant runAt) {
        return new BulkRequest(BulkAction.RETRY, filter, null, runAt, DEFAULT_BATCH_SIZE);
    }

    /** Cancel each live instance the filter matches, with its live descendants. */
    public static BulkRequest cancel(InstanceFilter filter) {
        return new BulkRequest(BulkAction.CANCEL, filter, null, null, DEFAULT_BATCH_SIZE);
    }

    /** Delete each settled instance the filter matches. */
    public static BulkRequest delete(InstanceFilter filter) {
        return new BulkRequest(BulkAction.DELETE, filter, null, null, DEFAULT_BATCH_SIZE);
    }

    /** Set the priority of each live instance the filter matches (checked by {@link DurableAdmin#startBulk}). */
    public static BulkRequest setPriority(InstanceFilter filter, int priority) {
        return new BulkRequest(BulkAction.SET_PRIORITY, filter, priority, null, DEFAULT_BATCH_SIZE);
    }

    /**
     * Migrate each instance the filter matches that is not executing and is of an older version of a
     * workflow the engine running the job can migrate; usually made by {@link DurableAdmin#migrate}.
     */
    public static BulkRequest migrate(InstanceFilter filter) {
        return new BulkRequest(BulkAction.MIGRATE, filter, null, null, DEFAULT_BATCH_SIZE);
    }

    /** The same request acting on {@code batchSize} instances per chunk (1 to {@link #MAX_BATCH_SIZE}). */
    public BulkRequest batchSize(int batchSize) {
        if (batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
            throw new IllegalArgumentException("batchSize must be between 1 and " + MAX_BATCH_SIZE + ", was "
                    + batchSize);
        }
        return new BulkRequest(action, filter, priority, runAt, batchSize);
    }

    public BulkAction action() {
        return action;
    }

    public InstanceFilter filter() {
        return filter;
    }

    /** The new priority of {@link BulkAction#SET_PRIORITY}; null for the other actions. */
    public @Nullable Integer priority() {
        return priority;
    }

    /** When retried instances are due ({@link BulkAction#RETRY}); null for now. */
    public @Nullable Instant runAt() {
        return runAt;
    }

    public int batchSize() {
        return batchSize;
    }

    @Override
    public String toString() {
        return "BulkRequest{action=" + action + ", filter=" + filter + ", priority=" + priority + ", runAt=" + runAt
                + ", batchSize=" + batchSize + "}";
    }
}
