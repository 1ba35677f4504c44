package dev.durable;

/**
 * A signal refused because its instance's inbox already holds as many unconsumed signals as
 * {@link EngineOptions#maxInboxSignals()} allows: every claim of the instance carries its inbox, so
 * the inbox is bounded. Nothing was stored; the caller may try again once the instance consumed some.
 */
public class InboxFullException extends DurableException {

    private static final long serialVersionUID = 1L;

    public InboxFullException(long id, int limit) {
        super("the inbox of instance " + id + " already holds " + limit + " unconsumed signals, its limit"
                + " (EngineOptions.maxInboxSignals): signal refused");
    }
}
