package dev.durable;

/**
 * An outcome that was not committed because its run no longer owned the row: the lease expired
 * and the reaper (or another node) took it over, or it settled meanwhile. The newer owner's work
 * stands. From {@link DurableEngine#complete} also when the instance's cancel was requested: the
 * statement would have ended it cancelled, not as asked. Either way the caller's transaction should
 * roll back.
 */
public class StaleOutcomeException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final long id;

    public StaleOutcomeException(long id, String worker) {
        this("outcome of instance " + id + " dropped: worker " + worker + " no longer owns it", id);
    }

    private StaleOutcomeException(String message, long id) {
        super(message);
        this.id = id;
    }

    /** A caller's outcome for instance {@code id} refused because the instance's cancel was requested. */
    public static StaleOutcomeException cancelRequested(long id) {
        return new StaleOutcomeException("outcome of instance " + id + " dropped: its cancel was requested (roll"
                + " back: the run ends it cancelled)", id);
    }

    public long id() {
        return id;
    }
}
