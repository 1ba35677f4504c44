package dev.durable;

import com.fasterxml.jackson.annotation.JsonIgnore;
import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * A snapshot of one job or workflow instance as the database holds it. State and result are the
 * stored JSON ({@link #stateJson()}, {@link #resultJson()}), typed through the engine's codec
 * ({@link #state(Class)}, {@link #result(Class)}), or as JSON trees ({@link #stateTree()},
 * {@link #resultTree()}) that a web endpoint returns as JSON rather than as a string of JSON.
 *
 * <p>Instances the engine hands out carry its codec; one built with the constructor without a codec
 * decodes with the default {@link JacksonJsonCodec}. The codec takes no part in equality and is not
 * serialized.
 */
public record Instance(
        long id,
        String type,
        int typeVersion,
        String queue,
        int priority,
        InstanceStatus status,
        String step,
        @Nullable String stateJson,
        @Nullable String resultJson,
        @Nullable String lastError,
        int attempt,
        int maxAttempts,
        Instant eligibleAt,
        List<String> awaitedSignals,
        @Nullable Instant awaitDeadline,
        @Nullable Long parentId,
        int childrenPending,
        @Nullable String concurrencyKey,
        @Nullable String correlationKey,
        @Nullable String claimedBy,
        @Nullable Instant leaseExpiresAt,
        boolean cancelRequested,
        Instant insertedAt,
        Instant updatedAt,
        @JsonIgnore JsonCodec codec) {

    /**
     * The default codec, built on first use: building it scans the class path for Jackson modules
     * (file reads), which must not happen on the event loop that merely reads an instance.
     */
    private static final JsonCodec DEFAULT_CODEC = new JsonCodec() {
        @Override
        public String encode(Object value) {
            return DefaultCodec.CODEC.encode(value);
        }

        @Override
        public <T> T decode(String json, Class<T> type) {
            return DefaultCodec.CODEC.decode(json, type);
        }

        @Override
        public void prepare(Class<?> type) {
            DefaultCodec.CODEC.prepare(type);
        }

        @Override
        public JsonNode tree(String json) {
            return DefaultCodec.CODEC.tree(json);
        }
    };

    private static final class DefaultCodec {
        static final JsonCodec CODEC = new JacksonJsonCodec();
    }

    public Instance {
        awaitedSignals = List.copyOf(awaitedSignals);
        Objects.requireNonNull(codec, "codec");
    }

    /** An instance that decodes with the default codec. */
    public Instance(long id, String type, int typeVersion, String queue, int priority, InstanceStatus status,
            String step, @Nullable String stateJson, @Nullable String resultJson, @Nullable String lastError,
            int attempt, int maxAttempts, Instant eligibleAt, List<String> awaitedSignals,
            @Nullable Instant awaitDeadline, @Nullable Long parentId, int childrenPending,
            @Nullable String concurrencyKey, @Nullable String correlationKey, @Nullable String claimedBy,
            @Nullable Instant leaseExpiresAt, boolean cancelRequested, Instant insertedAt, Instant updatedAt) {
        this(id, type, typeVersion, queue, priority, status, step, stateJson, resultJson, lastError, attempt,
                maxAttempts, eligibleAt, awaitedSignals, awaitDeadline, parentId, childrenPending, concurrencyKey,
                correlationKey, claimedBy, leaseExpiresAt, cancelRequested, insertedAt, updatedAt, DEFAULT_CODEC);
    }

    /** The same snapshot, decoding with {@code codec}. */
    public Instance withCodec(JsonCodec codec) {
        return codec == this.codec ? this : new Instance(id, type, typeVersion, queue, priority, status, step,
                stateJson, resultJson, lastError, attempt, maxAttempts, eligibleAt, awaitedSignals, awaitDeadline,
                parentId, childrenPending, concurrencyKey, correlationKey, claimedBy, leaseExpiresAt,
                cancelRequested, insertedAt, updatedAt, codec);
    }

    /** The state (a workflow's state, a job's arguments) decoded as {@code type}; null when there is none. */
    public <T> @Nullable T state(Class<T> type) {
        return stateJson == null ? null : codec.decode(stateJson, type);
    }

    /** The result decoded as {@code type}; null before the instance is done (or when it returned null). */
    public <T> @Nullable T result(Class<T> type) {
        return resultJson == null ? null : codec.decode(resultJson, type);
    }

    /** The state as a JSON tree; null when there is none. */
    public @Nullable JsonNode stateTree() {
        return stateJson == null ? null : codec.tree(stateJson);
    }

    /** The result as a JSON tree; null when there is none. */
    public @Nullable JsonNode resultTree() {
        return resultJson == null ? null : codec.tree(resultJson);
    }

    // The codec is how the snapshot decodes, not part of it.
    @Override
    public boolean equals(Object other) {
        return other instanceof Instance that && id == that.id && typeVersion == that.typeVersion
                && priority == that.priority && attempt == that.attempt && maxAttempts == that.maxAttempts
                && childrenPending == that.childrenPending && cancelRequested == that.cancelRequested
                && type.equals(that.type) && queue.equals(that.queue) && status == that.status
                && step.equals(that.step) && Objects.equals(stateJson, that.stateJson)
                && Objects.equals(resultJson, that.resultJson) && Objects.equals(lastError, that.lastError)
                && eligibleAt.equals(that.eligibleAt) && awaitedSignals.equals(that.awaitedSignals)
                && Objects.equals(awaitDeadline, that.awaitDeadline) && Objects.equals(parentId, that.parentId)
                && Objects.equals(concurrencyKey, that.concurrencyKey)
                && Objects.equals(correlationKey, that.correlationKey) && Objects.equals(claimedBy, that.claimedBy)
                && Objects.equals(leaseExpiresAt, that.leaseExpiresAt) && insertedAt.equals(that.insertedAt)
                && updatedAt.equals(that.updatedAt);
    }

    @Override
    public int hashCode() {
        return Objects.hash(id, type, typeVersion, queue, priority, status, step, stateJson, resultJson, lastError,
                attempt, maxAttempts, eligibleAt, awaitedSignals, awaitDeadline, parentId, childrenPending,
                concurrencyKey, correlationKey, claimedBy, leaseExpiresAt, cancelRequested, insertedAt, updatedAt);
    }

    @Override
    public String toString() {
        return "Instance[id=" + id + ", type=" + type + ", typeVersion=" + typeVersion + ", queue=" + queue
                + ", priority=" + priority + ", status=" + status + ", step=" + step + ", stateJson=" + stateJson
                + ", resultJson=" + resultJson + ", lastError=" + lastError + ", attempt=" + attempt
                + ", maxAttempts=" + maxAttempts + ", eligibleAt=" + eligibleAt + ", awaitedSignals="
                + awaitedSignals + ", awaitDeadline=" + awaitDeadline + ", parentId=" + parentId
                + ", childrenPending=" + childrenPending + ", concurrencyKey=" + concurrencyKey
                + ", correlationKey=" + correlationKey + ", claimedBy=" + claimedBy + ", leaseExpiresAt="
                + leaseExpiresAt + ", cancelRequested=" + cancelRequested + ", insertedAt=" + insertedAt
                + ", updatedAt=" + updatedAt + "]";
    }
}
