package dev.durable;

import java.time.Duration;
import java.time.Instant;
import java.util.EnumSet;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * What to insert: a type, its arguments and where and when to run it. Immutable; each
 * {@code withX} returns a copy. The engine checks the rules when the request is inserted and
 * answers a broken one with {@link InvalidRequestException}.
 *
 * <pre>{@code
 * JobRequest.of("send-email", new Email("a@b.c"))
 *     .queue("mail").priority(-1).runIn(Duration.ofMinutes(5)).correlationKey("welcome:42")
 * }</pre>
 */
public final class JobRequest {

    /** Statuses in which a correlation key is occupied by default: until the instance settles. */
    public static final Set<InstanceStatus> DEFAULT_OCCUPIED = EnumSet.of(
            InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING,
            InstanceStatus.AWAITING_SIGNAL, InstanceStatus.AWAITING_CHILDREN);

    private final String type;
    private final @Nullable Object args;
    private final @Nullable String queue;
    private final int priority;
    private final @Nullable Instant runAt;
    private final @Nullable Duration runIn;
    private final @Nullable Integer maxAttempts;
    private final @Nullable String concurrencyKey;
    private final @Nullable String correlationKey;
    private final Set<InstanceStatus> occupiedStatuses;

    private JobRequest(String type, @Nullable Object args, @Nullable String queue, int priority,
            @Nullable Instant runAt, @Nullable Duration runIn, @Nullable Integer maxAttempts,
            @Nullable String concurrencyKey, @Nullable String correlationKey,
            Set<InstanceStatus> occupiedStatuses) {
        this.type = type;
        this.args = args;
        this.queue = queue;
        this.priority = priority;
        this.runAt = runAt;
        this.runIn = runIn;
        this.maxAttempts = maxAttempts;
        this.concurrencyKey = concurrencyKey;
        this.correlationKey = correlationKey;
        this.occupiedStatuses = occupiedStatuses;
    }

    /** A request for {@code type} with {@code args} (any value the codec can encode, or null). */
    public static JobRequest of(String type, @Nullable Object args) {
        return new JobRequest(type, args, null, 0, null, null, null, null, null, DEFAULT_OCCUPIED);
    }

    /** The queue; unset means the type's default queue. */
    public JobRequest queue(String queue) {
        return new JobRequest(type, args, queue, priority, runAt, runIn, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /** Lower runs first; 0 by default, negative allowed. */
    public JobRequest priority(int priority) {
        return new JobRequest(type, args, queue, priority, runAt, runIn, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /** Not before this instant (compared with the database clock). */
    public JobRequest runAt(Instant runAt) {
        return new JobRequest(type, args, queue, priority, runAt, null, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /** Not before this long after the insert, by the database clock. */
    public JobRequest runIn(Duration runIn) {
        return new JobRequest(type, args, queue, priority, null, runIn, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /** Runs at most this many times (first run included); unset means the type's default. */
    public JobRequest maxAttempts(int maxAttempts) {
        return new JobRequest(type, args, queue, priority, runAt, runIn, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /** At most one instance with this key executes at a time, across every node. */
    public JobRequest concurrencyKey(String concurrencyKey) {
        return new JobRequest(type, args, queue, priority, runAt, runIn, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /** A business key: a second insert while the first is live is a duplicate. */
    public JobRequest correlationKey(String correlationKey) {
        return new JobRequest(type, args, queue, priority, runAt, runIn, maxAttempts,
                concurrencyKey, correlationKey, occupiedStatuses);
    }

    /**
     * A business key occupied only in the given statuses (for example every status, to insert a
     * key at most once ever).
     */
    public JobRequest correlationKey(String correlationKey, Set<InstanceStatus> occupiedStatuses) {
        return new JobRequest(type, args, queue, priority, runAt, runIn, maxAttempts,
                concurrencyKey, correlationKey, Set.copyOf(occupiedStatuses));
    }

    public String type() {
        return type;
    }

    public @Nullable Object args() {
        return args;
    }

    public @Nullable String queue() {
        return queue;
    }

    public int priority() {
        return priority;
    }

    public @Nullable Instant runAt() {
        return runAt;
    }

    public @Nullable Duration runIn() {
        return runIn;
    }

    public @Nullable Integer maxAttempts() {
        return maxAttempts;
    }

    public @Nullable String concurrencyKey() {
        return concurrencyKey;
    }

    public @Nullable String correlationKey() {
        return correlationKey;
    }

    public Set<InstanceStatus> occupiedStatuses() {
        return occupiedStatuses;
    }

    @Override
    public String toString() {
        return "JobRequest{type=" + type + ", queue=" + queue + ", priority=" + priority
                + (runAt != null ? ", runAt=" + runAt : "") + (runIn != null ? ", runIn=" + runIn : "")
                + (correlationKey != null ? ", correlationKey=" + correlationKey : "")
                + (concurrencyKey != null ? ", concurrencyKey=" + concurrencyKey : "") + "}";
    }
}
