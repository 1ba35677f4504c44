package dev.durable.limit;

import dev.durable.DurableException;

/**
 * The limiter could not be asked (its store is unreachable or timed out). The engine then admits
 * no limited row, gives the claimed ones back to the queue and keeps running unlimited work;
 * nothing is lost and nothing runs twice.
 */
public class LimiterUnavailableException extends DurableException {

    private static final long serialVersionUID = 1L;

    public LimiterUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
