package dev.durable;

import java.time.Duration;

/**
 * A database call did not answer within its bound ({@link EngineOptions#callTimeout()}): the
 * connection is stalled, the server overloaded or unreachable. The connection it ran on is
 * discarded, never reused. The call may or may not have taken effect; nothing the engine committed
 * is lost, and work whose outcome did not commit is recovered when its lease expires.
 */
public class DatabaseTimeoutException extends DurableTimeoutException {

    private static final long serialVersionUID = 1L;

    public DatabaseTimeoutException(Duration timeout) {
        super("the database did not answer within " + timeout);
    }
}
