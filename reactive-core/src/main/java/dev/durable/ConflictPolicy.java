package dev.durable;

import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What an insert with a correlation key does when a live instance already holds the key
 * ({@link JobRequest#onConflict}). Each policy is decided by the database in the insert's one
 * statement, so concurrent inserts of one key from many engines see one holder and one answer each
 * ({@link InsertResult#disposition()}):
 *
 * <ul>
 * <li>{@link #reject()}: the insert fails with {@link DuplicateCorrelationKeyException} (the default);
 * <li>{@link #skip()}: nothing is inserted; the answer is the holder's id, {@link InsertResult.Disposition#SKIPPED};
 * <li>{@link #replace()}: a holder that has not started (runnable, never claimed, at its first step,
 *     of the same type) takes the request's arguments, run-at and priority
 *     ({@link InsertResult.Disposition#REPLACED}); a holder that has started keeps running, and the
 *     request is kept as its one follow-up, inserted as a new instance when the holder settles,
 *     however it settles ({@link InsertResult.Disposition#FOLLOW_UP}; a later request replaces a
 *     waiting follow-up and gets the same id). Nothing pokes the queue then: the follow-up is picked
 *     at its queue's next poll;
 * <li>{@link #debounce(Duration)} and {@link #debounce(Duration, Duration)}: trailing debounce. The
 *     instance runs once its key has been quiet for {@code window}, or {@code maxWait} after the
 *     first insert at the latest, with the newest arguments; against a holder that has started, as
 *     {@code replace}, into a follow-up that is debounced the same way.
 * </ul>
 *
 * <p>A holder whose key stays occupied after it settled (see
 * {@link JobRequest#correlationKey(String, java.util.Set)}) is never changed: a request under any
 * policy but {@code reject} is then answered as skipped.
 *
 * <pre>{@code
 * engine.insertWithResult(JobRequest.of("reindex", customer).correlationKey("reindex:" + customer.id())
 *         .onConflict(ConflictPolicy.debounce(Duration.ofSeconds(5), Duration.ofMinutes(1))))
 * }</pre>
 */
public final class ConflictPolicy {

    /** The kinds of policy. */
    public enum Kind {
        REJECT, SKIP, REPLACE, DEBOUNCE
    }

    private static final ConflictPolicy REJECT = new ConflictPolicy(Kind.REJECT, null, null);
    private static final ConflictPolicy SKIP = new ConflictPolicy(Kind.SKIP, null, null);
    private static final ConflictPolicy REPLACE = new ConflictPolicy(Kind.REPLACE, null, null);

    private final Kind kind;
    private final @Nullable Duration window;
    private final @Nullable Duration maxWait;

    private ConflictPolicy(Kind kind, @Nullable Duration window, @Nullable Duration maxWait) {
        this.kind = kind;
        this.window = window;
        this.maxWait = maxWait;
    }

    /** A live key fails the insert with {@link DuplicateCorrelationKeyException} (the default). */
    public static ConflictPolicy reject() {
        return REJECT;
    }

    /** A live key is left to its holder; the answer names the holder. */
    public static ConflictPolicy skip() {
        return SKIP;
    }

    /** A live key's holder takes the newest request, or keeps it as its one follow-up once started. */
    public static ConflictPolicy replace() {
        return REPLACE;
    }

    /**
     * Trailing debounce without a bound: the instance runs once its key has been quiet for
     * {@code window} (positive), with the newest arguments.
     *
     * @throws InvalidRequestException when the window is null, zero or negative
     */
    public static ConflictPolicy debounce(Duration window) {
        return new ConflictPolicy(Kind.DEBOUNCE, checkWindow(window), null);
    }

    /**
     * Trailing debounce bounded by {@code maxWait}: the instance runs once its key has been quiet
     * for {@code window}, or {@code maxWait} after the first insert at the latest.
     *
     * @throws InvalidRequestException when the window is not positive or maxWait is shorter than it
     */
    public static ConflictPolicy debounce(Duration window, Duration maxWait) {
        checkWindow(window);
        if (maxWait == null || maxWait.compareTo(window) < 0) {
            throw new InvalidRequestException("debounce maxWait must be at least the window " + window + ", was "
                    + maxWait);
        }
        return new ConflictPolicy(Kind.DEBOUNCE, window, maxWait);
    }

    private static Duration checkWindow(@Nullable Duration window) {
        if (window == null || window.isZero() || window.isNegative()) {
            throw new InvalidRequestException("debounce window must be positive, was " + window);
        }
        return window;
    }

    public Kind kind() {
        return kind;
    }

    /** The quiet time of a debounce; null for the other kinds. */
    public @Nullable Duration window() {
        return window;
    }

    /** The latest a debounced instance waits after its first insert; null for none or another kind. */
    public @Nullable Duration maxWait() {
        return maxWait;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof ConflictPolicy that && kind == that.kind && Objects.equals(window, that.window)
                && Objects.equals(maxWait, that.maxWait);
    }

    @Override
    public int hashCode() {
        return Objects.hash(kind, window, maxWait);
    }

    @Override
    public String toString() {
        return kind == Kind.DEBOUNCE ? "debounce(" + window + (maxWait == null ? "" : ", " + maxWait) + ")"
                : kind.name().toLowerCase(java.util.Locale.ROOT);
    }
}
