package dev.durable.sync;

import dev.durable.DurableException;

/** Signalled by a sync scheduler that has been shut down, to a pass asked of it or cut short. */
public class SyncSchedulerClosedException extends DurableException {

    private static final long serialVersionUID = 1L;

    public SyncSchedulerClosedException(String message) {
        super(message);
    }
}
