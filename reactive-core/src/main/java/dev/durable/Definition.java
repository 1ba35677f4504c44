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
}
