package dev.durable.admin;

import dev.durable.DurableException;
import dev.durable.InstanceStatus;

/**
 * An action on an instance whose status (or family) does not allow it: retry of an instance that did
 * not fail or was not cancelled, delete of a live instance, either on a child whose parent still waits
 * for it. The message says which instance, its status and why.
 */
public class InstanceStateException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final long id;
    private final InstanceStatus status;

    public InstanceStateException(long id, InstanceStatus status, String why) {
        super("instance " + id + " is " + status.sqlName() + ": " + why);
        this.id = id;
        this.status = status;
    }

    public long id() {
        return id;
    }

    public InstanceStatus status() {
        return status;
    }
}
