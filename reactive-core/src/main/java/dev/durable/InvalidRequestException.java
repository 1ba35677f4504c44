package dev.durable;

/** A request whose arguments break a rule (blank queue, max attempts below 1, ...). */
public class InvalidRequestException extends DurableException {

    private static final long serialVersionUID = 1L;

    public InvalidRequestException(String message) {
        super(message);
    }
}
