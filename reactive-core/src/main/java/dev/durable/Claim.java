package dev.durable;

/**
 * The claim a run holds on its instance: the engine worker that claimed it, the attempt the claim
 * took and the step it runs. Every commit of an outcome is guarded by it, so a run whose claim was
 * lost (its lease ran out and the instance was claimed again, or it settled meanwhile) can never
 * commit over the newer claim. A caller that completes a run in its own transaction
 * ({@link DurableEngine#complete}) passes the claim of the run it completes ({@link JobContext#claim()},
 * {@link StepContext#claim()}), from inside that run: a claim belongs to its run and is spent when the
 * run's handler returns.
 */
public record Claim(long id, String type, String step, String worker, int attempt) {

    public Claim {
        Options.requireNonNull("type", type);
        Options.requireNonNull("step", step);
        Options.requireNonNull("worker", worker);
    }
}
