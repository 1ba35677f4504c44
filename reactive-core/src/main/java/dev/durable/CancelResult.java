package dev.durable;

/** What {@code cancel} did. */
public enum CancelResult {
    /** The instance was runnable or parked and is now cancelled. */
    CANCELLED,
    /** The instance is executing: it is cancelled at its next commit, its outcome discarded. */
    REQUESTED,
    /** The instance had already settled (done, failed or cancelled); nothing changed. */
    ALREADY_SETTLED,
    /** No instance has that id. */
    NOT_FOUND
}
