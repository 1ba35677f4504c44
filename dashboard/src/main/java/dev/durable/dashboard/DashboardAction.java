package dev.durable.dashboard;

/**
 * What a dashboard request does, as the {@link DashboardAuthorizer} is asked about it: {@link #READ} for
 * every page and the live feed, one constant per action (each a POST).
 */
public enum DashboardAction {
    /** Any page, the live feed and the static files. */
    READ,
    /** Retry a failed or cancelled instance in place. */
    RETRY,
    /** Make a waiting instance due now. */
    RUN_NOW,
    /** Change an instance's priority. */
    CHANGE_PRIORITY,
    /** Cancel an instance and its live descendants. */
    CANCEL,
    /** Send a signal to an instance. */
    SIGNAL,
    /** Delete a settled instance. */
    DELETE,
    /** Run a settled instance again from one of its steps (with the state that step last started with). */
    REPLAY,
    /** Start a new instance from one of an instance's steps, linked to it. */
    FORK,
    /** Pause or resume a queue on every engine. */
    PAUSE_QUEUE,
    /** Any action over every instance a filter matches. */
    BULK;

    /** True for every action that changes something (all but {@link #READ}). */
    public boolean writes() {
        return this != READ;
    }
}
