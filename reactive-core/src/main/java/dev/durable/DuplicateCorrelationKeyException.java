package dev.durable;

import org.jspecify.annotations.Nullable;

/** An insert whose correlation key is already held by a live instance. */
public class DuplicateCorrelationKeyException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final @Nullable String correlationKey;

    public DuplicateCorrelationKeyException(@Nullable String correlationKey, Throwable cause) {
        super("correlation key " + (correlationKey == null ? "(see cause)" : "'" + correlationKey + "'")
                + " is already held by a live instance", cause);
        this.correlationKey = correlationKey;
    }

    /** The key that is taken, when the database named it. */
    public @Nullable String correlationKey() {
        return correlationKey;
    }
}
