package dev.durable.limit;

import dev.durable.DurableTimeoutException;

/** {@link EngineLimits#acquire} waited its whole bound and the limit never granted the permit. */
public class PermitTimeoutException extends DurableTimeoutException {

    private static final long serialVersionUID = 1L;

    public PermitTimeoutException(String message) {
        super(message);
    }
}
