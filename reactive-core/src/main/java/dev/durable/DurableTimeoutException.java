package dev.durable;

import java.time.Duration;

/** Waiting took longer than the caller allowed; the work goes on. */
public class DurableTimeoutException extends DurableException {

    private static final long serialVersionUID = 1L;

    public DurableTimeoutException(long id, Duration timeout) {
        super("instance " + id + " did not settle within " + timeout);
    }

    public DurableTimeoutException(String message) {
        super(message);
    }
}
