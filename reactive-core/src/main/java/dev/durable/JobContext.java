package dev.durable;

/**
 * What a running job knows about itself, and whether it should stop ({@link #cancellation()}: the
 * instance was cancelled or the run lost its claim). {@code worker} is the engine worker that claimed
 * the run (empty in a context made by hand), {@code claimStamp} the claim's stamp ({@link Claim#stamp()}).
 */
public record JobContext(long id, String type, String queue, int attempt, int maxAttempts, Cancellation cancellation,
        String worker, long claimStamp) {

    /** A context claimed by {@code worker} without a stamp. */
    public JobContext(long id, String type, String queue, int attempt, int maxAttempts, Cancellation cancellation,
            String worker) {
        this(id, type, queue, attempt, maxAttempts, cancellation, worker, 0);
    }

    /** A context that is never cancelled: for tests that call a handler by hand. */
    public JobContext(long id, String type, String queue, int attempt, int maxAttempts) {
        this(id, type, queue, attempt, maxAttempts, Cancellation.NEVER, "");
    }

    /** A context made by hand, with a cancellation the test controls. */
    public JobContext(long id, String type, String queue, int attempt, int maxAttempts, Cancellation cancellation) {
        this(id, type, queue, attempt, maxAttempts, cancellation, "");
    }

    /** True on the last attempt the instance has left. */
    public boolean isLastAttempt() {
        return attempt >= maxAttempts;
    }

    /** This run's claim: what completing it from a caller's transaction is guarded by ({@link DurableEngine#complete}). */
    public Claim claim() {
        return new Claim(id, type, JobDefinition.STEP, worker, attempt, claimStamp);
    }
}
