package dev.durable;

/**
 * An outcome that was not committed because its run no longer owned the row: the lease expired
 * and the reaper (or another node) took it over. The newer owner's work stands.
 */
public class StaleOutcomeException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final long id;

    public StaleOutcomeException(long id, String worker) {
        super("outcome of instance " + id + " dropped: worker " + worker + " no longer owns it");
        this.id = id;
    }

    public long id() {
        return id;
    }
}
