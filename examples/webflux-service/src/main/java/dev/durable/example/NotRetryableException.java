package dev.durable.example;

import dev.durable.InstanceStatus;

/** A retry of an instance that has not failed or been cancelled (it is live, or done). */
public class NotRetryableException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public NotRetryableException(long id, InstanceStatus status) {
        super("instance " + id + " is " + status.sqlName() + ": only failed or cancelled instances can be retried");
    }
}
