package dev.durable;

/**
 * Thrown or signalled by a handler to fail the instance at once, without the retries left.
 */
public class PermanentFailureException extends DurableException {

    private static final long serialVersionUID = 1L;

    public PermanentFailureException(String message) {
        super(message);
    }

    public PermanentFailureException(String message, Throwable cause) {
        super(message, cause);
    }
}
