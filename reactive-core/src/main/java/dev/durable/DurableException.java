package dev.durable;

/** The base of every error Durable signals. Subtypes name what a caller can act on. */
public class DurableException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public DurableException(String message) {
        super(message);
    }

    public DurableException(String message, Throwable cause) {
        super(message, cause);
    }
}
