package dev.durable;

import java.time.Duration;

/** Waiting for an instance took longer than the caller allowed; the instance goes on. */
public class DurableTimeoutException extends DurableException {

    private static final long serialVersionUID = 1L;

    public DurableTimeoutException(long id, Duration timeout) {
        super("instance " + id + " did not settle within " + timeout);
    }
}
