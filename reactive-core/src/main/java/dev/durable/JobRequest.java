package dev.durable;

import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
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

    /**
     * The most bytes (UTF-8) of a key: a concurrency, gate or correlation key, a signal's dedup key,
     * a rate-limit partition. Checked in bytes, not characters: each key lands in a btree index,
     * whose rows PostgreSQL refuses above about 2,700 bytes (1,024 CJK characters are 3,072 bytes).
     * Measured on PostgreSQL 15 and 17 with incompressible keys and the longest names (128
     * characters, 384 bytes), the most each index takes is 2,692 bytes for a concurrency or
     * correlation key, 2,684 for a dedup key, 2,300 for a gate key and 2,304 for a rate partition
     * ({@code KeyBoundsIT}): this limit leaves a wide margin under all of them, so no key the API
     * accepts can make the database refuse a row later, at a pick or a commit.
     */
    public static final int MAX_KEY_BYTES = 1024;

    /** The most urgent priority a request may have (lower runs first). */
    public static final int MIN_PRIORITY = -32_768;

    /** The least urgent priority a request may have. */
    public static final int MAX_PRIORITY = 32_767;

    /** Statuses in which a correlation key is occupied by default: until the instance settles. */
    public static final Set<InstanceStatus> DEFAULT_OCCUPIED = EnumSet.of(
            InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING,
            InstanceStatus.AWAITING_SIGNAL, InstanceStatus.AWAITING_CHILDREN);

    private final String type;
    private final @Nullable Object args;
    private @Nullable String queue;
    private int priority;
    private @Nullable Instant runAt;
    private @Nullable Duration runIn;
    private @Nullable Integer maxAttempts;
    private @Nullable String concurrencyKey;
    private @Nullable String correlationKey;
    private Set<InstanceStatus> occupiedStatuses = DEFAULT_OCCUPIED;
    private @Nullable String gate;
    private @Nullable RateSlot rateLimit;
    private @Nullable WindowSlot window;
    private @Nullable String fairnessKey;
    private ConflictPolicy onConflict = ConflictPolicy.reject();

    private JobRequest(String type, @Nullable Object args) {
        this.type = type;
        this.args = args;
    }

    /** A copy with one change: every request is immutable once handed out. */
    private JobRequest with(java.util.function.Consumer<JobRequest> change) {
        JobRequest copy = new JobRequest(type, args);
        copy.queue = queue;
        copy.priority = priority;
        copy.runAt = runAt;
        copy.runIn = runIn;
        copy.maxAttempts = maxAttempts;
        copy.concurrencyKey = concurrencyKey;
        copy.correlationKey = correlationKey;
        copy.occupiedStatuses = occupiedStatuses;
        copy.gate = gate;
        copy.rateLimit = rateLimit;
        copy.window = window;
        copy.fairnessKey = fairnessKey;
        copy.onConflict = onConflict;
        change.accept(copy);
        return copy;
    }

    /**
     * The key (typically a tenant) whose share of a fair queue this job's claims count against
     * ({@link QueueOptions.Builder#fairness}). At most {@link #MAX_KEY_BYTES} bytes in UTF-8; on a queue
     * without fairness it is kept and ignored.
     */
    public JobRequest fairnessKey(String fairnessKey) {
        return with(r -> r.fairnessKey = fairnessKey);
    }

    /** A request for {@code type} with {@code args} (any value the codec can encode, or null). */
    public static JobRequest of(String type, @Nullable Object args) {
        return new JobRequest(type, args);
    }

    /** The queue; unset means the type's default queue. */
    public JobRequest queue(String queue) {
        return with(r -> r.queue = queue);
    }

    /**
     * Lower runs first; 0 by default, from {@link #MIN_PRIORITY} to {@link #MAX_PRIORITY} (a value
     * outside is refused at insert with {@link InvalidRequestException}).
     */
    public JobRequest priority(int priority) {
        return with(r -> r.priority = priority);
    }

    /** Not before this instant (compared with the database clock). */
    public JobRequest runAt(Instant runAt) {
        return with(r -> {
            r.runAt = runAt;
            r.runIn = null;
        });
    }

    /** Not before this long after the insert, by the database clock. */
    public JobRequest runIn(Duration runIn) {
        return with(r -> {
            r.runIn = runIn;
            r.runAt = null;
        });
    }

    /** Runs at most this many times per step (first run included); unset means the type's default. */
    public JobRequest maxAttempts(int maxAttempts) {
        return with(r -> r.maxAttempts = maxAttempts);
    }

    /**
     * At most one instance with this key executes at a time, across every node. At most
     * {@link #MAX_KEY_BYTES} bytes in UTF-8, as every key.
     */
    public JobRequest concurrencyKey(String concurrencyKey) {
        return with(r -> {
            r.concurrencyKey = concurrencyKey;
            r.gate = null;
        });
    }

    /**
     * At most K instances of the named gate (configured with {@link EngineOptions.Builder#gate}) execute at
     * once, across every node.
     */
    public JobRequest gate(String gate) {
        return gate(gate, "");
    }

    /** At most K instances per {@code key} of the named gate execute at once (K per customer, say). */
    public JobRequest gate(String gate, String key) {
        return with(r -> {
            r.gate = gate;
            r.concurrencyKey = key;
        });
    }

    /** Admitted only when the named token bucket has a token ({@link EngineOptions.Builder#rateLimit}). */
    public JobRequest rateLimit(String rateLimit) {
        return rateLimit(rateLimit, 1, null);
    }

    /** Admitted only when the named bucket has a token in {@code partition} (a bucket per tenant, say). */
    public JobRequest rateLimit(String rateLimit, String partition) {
        return rateLimit(rateLimit, 1, partition);
    }

    /**
     * Admitted only when the named bucket has {@code weight} tokens; {@code partition} (or null)
     * gives each partition a bucket of its own (a bucket per tenant, say).
     */
    public JobRequest rateLimit(String rateLimit, int weight, @Nullable String partition) {
        return with(r -> r.rateLimit = rateLimit == null ? null : new RateSlot(rateLimit, partition, weight));
    }

    /** Admitted only while sliding window {@code window} can take one more in {@code partition}. */
    public JobRequest window(String window, String partition) {
        return window(window, 1, partition);
    }

    /**
     * Admitted only while sliding window {@code window} ({@link EngineOptions.Builder#window}) can take
     * {@code weight} more in partition {@code partition} (or null) within its length. A row stacks a
     * gate, a token bucket and a window, each optional, admitted all or nothing: none of them is
     * spent on a row another refuses.
     */
    public JobRequest window(String window, int weight, @Nullable String partition) {
        return with(r -> r.window = window == null ? null : new WindowSlot(window, partition, weight));
    }

    /** A business key: a second insert while the first is live is a duplicate. */
    public JobRequest correlationKey(String correlationKey) {
        return with(r -> r.correlationKey = correlationKey);
    }

    /**
     * A business key occupied only in the given statuses (for example every status, to insert a
     * key at most once ever).
     */
    public JobRequest correlationKey(String correlationKey, Set<InstanceStatus> occupiedStatuses) {
        Set<InstanceStatus> statuses = Set.copyOf(occupiedStatuses);
        return with(r -> {
            r.correlationKey = correlationKey;
            r.occupiedStatuses = statuses;
        });
    }

    /**
     * What the insert does when a live instance holds this request's correlation key: reject (the
     * default), skip, replace or debounce ({@link ConflictPolicy}). Any policy but reject needs a
     * correlation key, and a debounce decides the run time itself (no {@link #runAt}/{@link #runIn});
     * a broken combination is refused at insert with {@link InvalidRequestException}.
     */
    public JobRequest onConflict(ConflictPolicy policy) {
        return with(r -> r.onConflict = policy);
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

    public @Nullable String fairnessKey() {
        return fairnessKey;
    }

    public Set<InstanceStatus> occupiedStatuses() {
        return occupiedStatuses;
    }

    public @Nullable String gate() {
        return gate;
    }

    /** The rate slot: the token bucket (name, partition) and the weight it admits this request by. */
    public @Nullable RateSlot rateLimit() {
        return rateLimit;
    }

    /** The window slot: the sliding window (name, partition) and the weight it counts this request by. */
    public @Nullable WindowSlot window() {
        return window;
    }

    public ConflictPolicy onConflict() {
        return onConflict;
    }

    @Override
    public String toString() {
        return "JobRequest{type=" + type + ", queue=" + queue + ", priority=" + priority
                + (runAt != null ? ", runAt=" + runAt : "") + (runIn != null ? ", runIn=" + runIn : "")
                + (correlationKey != null ? ", correlationKey=" + correlationKey : "")
                + (fairnessKey != null ? ", fairnessKey=" + fairnessKey : "")
                + (onConflict.kind() != ConflictPolicy.Kind.REJECT ? ", onConflict=" + onConflict : "")
                + (concurrencyKey != null ? ", concurrencyKey=" + concurrencyKey : "")
                + (gate != null ? ", gate=" + gate : "") + (rateLimit != null ? ", rateLimit=" + rateLimit.name() : "")
                + (window != null ? ", window=" + window.name() : "") + "}";
    }
}
