package dev.durable;

/**
 * A {@link DurableEngine#replay} or {@link DurableEngine#fork} that cannot start the instance at the
 * step asked for; {@link #reason()} says why (an unknown id is a {@link NoTargetException}). Nothing was
 * changed.
 */
public class ReplayRefusedException extends DurableException {

    private static final long serialVersionUID = 1L;

    /** Why a replay or fork was refused. */
    public enum Reason {
        /** A replay needs a settled instance (done, failed or cancelled); this one is live (fork it instead). */
        INSTANCE_LIVE,
        /** The instance's type has no such step (or, when this engine does not know the type, it never ran it). */
        UNKNOWN_STEP,
        /** The instance never ran that step, so it has no input to start from: give a state. */
        NO_RECORDED_INPUT,
        /** The instance is a child whose parent still waits for its children: it was counted off already. */
        PARENT_WAITS,
        /** Another live instance now holds the instance's correlation key. */
        KEY_OCCUPIED,
        /**
         * The instance is a parent some of whose children still run: they would count themselves off the
         * children its replayed steps spawn. Wait for them, or cancel them.
         */
        CHILDREN_LIVE,
        /**
         * The step's recorded input is of a workflow version this engine has no migration path from
         * (below the definition's lowest version): the replayed instance would never run.
         */
        NO_MIGRATION_PATH
    }

    private final long id;
    private final String step;
    private final Reason reason;

    public ReplayRefusedException(long id, String step, Reason reason, String why) {
        super("instance " + id + " cannot start again at step '" + step + "': " + why);
        this.id = id;
        this.step = step;
        this.reason = reason;
    }

    public long id() {
        return id;
    }

    public String step() {
        return step;
    }

    public Reason reason() {
        return reason;
    }
}
