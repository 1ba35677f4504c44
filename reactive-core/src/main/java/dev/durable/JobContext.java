package dev.durable;

/** What a running job knows about itself. */
public record JobContext(long id, String type, String queue, int attempt, int maxAttempts) {

    /** True on the last attempt the instance has left. */
    public boolean isLastAttempt() {
        return attempt >= maxAttempts;
    }
}
