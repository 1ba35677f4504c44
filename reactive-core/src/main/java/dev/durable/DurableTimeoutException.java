package dev.durable;

import java.time.Duration;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * Waiting took longer than the caller allowed; the work goes on. A wait for an instance carries
 * the last snapshot of it that the wait read, when it read one ({@link #lastSeen()}).
 */
public class DurableTimeoutException extends DurableException {

    private static final long serialVersionUID = 1L;

    /** Not serialized: a snapshot is for the caller that waited, not for a remote log. */
    private final transient @Nullable Instance lastSeen;

    public DurableTimeoutException(long id, Duration timeout) {
        this(id, timeout, null);
    }

    /** Instance {@code id} did not settle within {@code timeout}; {@code lastSeen} is how the wait last saw it. */
    public DurableTimeoutException(long id, Duration timeout, @Nullable Instance lastSeen) {
        super("instance " + id + " did not settle within " + timeout
                + (lastSeen == null ? "" : "; last seen " + lastSeen.status().sqlName() + " at step '"
                        + lastSeen.step() + "', attempt " + lastSeen.attempt()));
        this.lastSeen = lastSeen;
    }

    public DurableTimeoutException(String message) {
        super(message);
        this.lastSeen = null;
    }

    /** The instance as the wait last read it, when the wait was for an instance and read it at least once. */
    public Optional<Instance> lastSeen() {
        return Optional.ofNullable(lastSeen);
    }
}
