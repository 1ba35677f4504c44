package dev.durable.limit;

import dev.durable.InvalidRequestException;

/** A permit was asked of a name that is neither a gate nor a rate limit the engine is configured with. */
public class UnknownLimitException extends InvalidRequestException {

    private static final long serialVersionUID = 1L;

    public UnknownLimitException(String message) {
        super(message);
    }
}
