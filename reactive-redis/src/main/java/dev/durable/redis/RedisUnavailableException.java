package dev.durable.redis;

import dev.durable.DurableException;

/**
 * Redis could not be reached for an operation that needs it now (joining a membership group, say).
 * The caller may retry later; pokes never signal it, they fall back to polling instead.
 */
public class RedisUnavailableException extends DurableException {

    private static final long serialVersionUID = 1L;

    public RedisUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
