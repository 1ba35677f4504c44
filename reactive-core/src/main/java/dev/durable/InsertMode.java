package dev.durable;

/**
 * What {@link DurableEngine#insertAll(java.util.List, InsertMode)} does with a correlation key already
 * live, for requests without a {@link ConflictPolicy} of their own ({@link JobRequest#onConflict}): a
 * request's own policy always applies.
 */
public enum InsertMode {

    /**
     * A key held by a live instance, or repeated in the batch, fails the whole batch and inserts
     * nothing (the default).
     */
    REJECT_DUPLICATES,

    /**
     * A request whose key is held by a live instance, or by an earlier request of the same batch,
     * is skipped and answered with the holder's id; the others are inserted.
     */
    SKIP_DUPLICATES
}
