package dev.durable;

/** A signal addressed to no live instance: the id or key is unknown, or the instance settled. */
public class NoTargetException extends DurableException {

    private static final long serialVersionUID = 1L;

    public NoTargetException(String target) {
        super("no live instance " + target + " to signal");
    }
}
