package dev.durable.admin;

/** What a bulk job ({@link DurableAdmin#startBulk}) does to each instance its filter matches. */
public enum BulkAction {
    /** Retry in place each failed or cancelled instance, as {@link DurableAdmin#retry} does. */
    RETRY,
    /** Cancel each live instance with its live descendants, as {@link DurableAdmin#cancel} does. */
    CANCEL,
    /** Delete each settled instance, as {@link DurableAdmin#delete} does. */
    DELETE,
    /** Set the priority of each live instance, as {@link DurableAdmin#setPriority} does. */
    SET_PRIORITY,
    /**
     * Migrate each instance of an older version of a workflow that is not executing to the version
     * the engine running the job knows ({@link DurableAdmin#migrate}).
     */
    MIGRATE
}
