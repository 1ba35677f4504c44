package dev.durable;

/**
 * The claim a run holds on its instance: the engine worker that claimed it, the attempt the claim
 * took, the step it runs, and its {@code stamp} (the database transaction that made the claim: a
 * step's attempts restart at each transition, so one worker can claim an instance again at the
 * attempt it had before, and only the stamp tells the two claims apart). Every commit of an outcome
 * is guarded by it, so a run whose claim was lost (its lease ran out and the instance was claimed
 * again, or it settled meanwhile) can never commit over the newer claim. A caller that completes a run in its own transaction
 * ({@link DurableEngine#complete}) passes the claim of the run it completes ({@link JobContext#claim()},
 * {@link StepContext#claim()}), from inside that run: a claim belongs to its run and is spent when the
 * run's handler returns.
 */
public record Claim(long id, String type, String step, String worker, int attempt, long stamp) {

    public Claim {
        Options.requireNonNull("type", type);
        Options.requireNonNull("step", step);
        Options.requireNonNull("worker", worker);
    }

    /**
     * A claim without a stamp, which matches only a claim that recorded none (an instance claimed as
     * it was inserted): a run's own claim comes from its context ({@link JobContext#claim()},
     * {@link StepContext#claim()}).
     */
    public Claim(long id, String type, String step, String worker, int attempt) {
        this(id, type, step, worker, attempt, 0);
    }
}
