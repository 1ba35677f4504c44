package dev.durable;

/**
 * A call addressed to no instance it could act on: a signal to an unknown id or key or to a settled
 * instance, an await of an id that does not exist. The message says what was asked.
 */
public class NoTargetException extends DurableException {

    private static final long serialVersionUID = 1L;

    /** A signal to {@code target} ("with id 5", "with correlation key 'k'"), which no live instance is. */
    public NoTargetException(String target) {
        super("no live instance " + target + " to signal");
    }

    private NoTargetException(String message, boolean exact) {
        super(message);
    }

    /** No instance has {@code id}; {@code asked} says for what ("to await", "to cancel"), or is empty. */
    public static NoTargetException noInstance(long id, String asked) {
        return new NoTargetException("no instance with id " + id + (asked.isEmpty() ? "" : " " + asked), true);
    }
}
