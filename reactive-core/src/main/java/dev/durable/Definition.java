package dev.durable;

import java.time.Duration;

/** What every registered type has: a job ({@link JobDefinition}) or a workflow ({@link WorkflowDefinition}). */
public interface Definition {

    String type();

    /** The queue its instances go to unless the request names one. */
    String queue();

    /** Attempts per step (a job is one step) unless the request says otherwise. */
    int maxAttempts();

    Backoff backoff();

    /** The longest one step may run. */
    Duration timeout();

    /** The step a new instance starts at. */
    String initialStep();

    /** The version stored with new instances. */
    int version();

    /**
     * The oldest version of its instances this definition runs: 1 (every older instance runs as it
     * is, with this definition) unless it registers state migrations, then the lowest version from
     * which an unbroken chain of them reaches {@link #version()}. Instances below it are never picked.
     */
    default int lowestVersion() {
        return 1;
    }
}
