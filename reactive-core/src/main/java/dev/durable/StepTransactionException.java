package dev.durable;

/**
 * A transactional handler used its transaction's connection as only the engine may: to commit, roll
 * back or close it, to change its isolation or auto-commit, or at all once the handler's run ended
 * (the connection has gone back to the engine, and a statement then would run outside the run's
 * transaction). A mistake in the handler, not a passing fault: the instance fails at once, its
 * statements rolled back.
 */
public class StepTransactionException extends InvalidRequestException {

    private static final long serialVersionUID = 1L;

    public StepTransactionException(String message) {
        super(message);
    }
}
