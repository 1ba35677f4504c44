package dev.durable;

/**
 * What a running job knows about itself, and whether it should stop ({@link #cancellation()}: the
 * instance was cancelled or the run lost its claim).
 */
public record JobContext(long id, String type, String queue, int attempt, int maxAttempts, Cancellation cancellation) {

    /** A context that is never cancelled: for tests that call a handler by hand. */
    public JobContext(long id, String type, String queue, int attempt, int maxAttempts) {
        this(id, type, queue, attempt, maxAttempts, Cancellation.NEVER);
    }

    /** True on the last attempt the instance has left. */
    public boolean isLastAttempt() {
        return attempt >= maxAttempts;
    }
}
