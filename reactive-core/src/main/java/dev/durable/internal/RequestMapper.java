package dev.durable.internal;

import dev.durable.BatchTooLargeException;
import dev.durable.ConflictPolicy;
import dev.durable.Definition;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Limits;
import dev.durable.Outcome;
import dev.durable.PayloadTooLargeException;
import dev.durable.QueueNames;
import dev.durable.QueueOptions;
import dev.durable.UnknownTypeException;
import dev.durable.internal.sql.OutcomeRow.LimitChange;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;

/**
 * Checks requests and turns them into rows: for inserts, transactional inserts and children alike.
 * Every rule a caller can break is an {@link InvalidRequestException} (or a subtype) naming it.
 */
public final class RequestMapper {

    /** The latest run-at PostgreSQL is sure to read back as written (ISO years 1 to 9999). */
    private static final java.time.Instant MIN_RUN_AT = java.time.Instant.parse("0001-01-01T00:00:00Z");
    private static final java.time.Instant MAX_RUN_AT = java.time.Instant.parse("9999-12-31T23:59:59Z");
    /** A thousand years: far past any real schedule, far below what overflows a millisecond count. */
    private static final java.time.Duration MAX_RUN_IN = java.time.Duration.ofDays(365_250);

    private final Map<String, Definition> definitions;
    private final EngineOptions options;

    public RequestMapper(Map<String, Definition> definitions, EngineOptions options) {
        this.definitions = definitions;
        this.options = options;
    }

    /** Rows for the requests, children of {@code parentId} when it is not null. */
    public List<NewInstance> toRows(List<JobRequest> requests, @Nullable Long parentId) {
        return toRows(requests, parentId, null);
    }

    /**
     * As above, each row carrying {@code traceContext}: the trace context of the caller that inserts
     * them (null without tracing).
     */
    public List<NewInstance> toRows(List<JobRequest> requests, @Nullable Long parentId,
            @Nullable String traceContext) {
        if (requests == null || requests.isEmpty()) {
            throw new InvalidRequestException("requests must not be empty");
        }
        List<NewInstance> rows = new ArrayList<>(requests.size());
        long bytes = 0;
        for (JobRequest request : requests) {
            if (request == null) {
                throw new InvalidRequestException("requests must not contain null");
            }
            NewInstance row = toRow(request, parentId, traceContext);
            // Counted as the rows are built, so a batch far past the limit stops at the limit.
            bytes += rowBytes(row);
            // One request alone is bounded by maxPayloadBytes and the key limits.
            if (bytes > options.maxBatchBytes() && requests.size() > 1) {
                throw new BatchTooLargeException(requests.size(), bytes, options.maxBatchBytes());
            }
            rows.add(row);
        }
        return rows;
    }

    /**
     * A key may come once per batch that goes in under conflict policies (skip mixed with replace or
     * debounce): such a batch is one upsert, which applies to a row at most once, and which of two
     * requests of one key is the newer is the caller's to say, by sending them in two inserts.
     */
    public static void checkRepeatedKeys(List<NewInstance> rows) {
        if (rows.size() < 2) {
            return;
        }
        java.util.Set<String> seen = new java.util.HashSet<>();
        for (NewInstance row : rows) {
            if (row.correlationKey() != null && !seen.add(row.correlationKey())) {
                throw new InvalidRequestException("correlation key '" + row.correlationKey() + "' comes twice in a"
                        + " batch with conflict policies (replace or debounce among them): insert the newer request"
                        + " after the older one");
            }
        }
    }

    /** What a row weighs in a batch: its payload and its texts (keys, names), as UTF-8. */
    private static long rowBytes(NewInstance row) {
        return Keys.utf8Length(row.stateJson()) + Keys.utf8Length(row.type()) + Keys.utf8Length(row.queue())
                + Keys.utf8Length(row.concurrencyKey()) + Keys.utf8Length(row.correlationKey()) + Keys.utf8Length(row.gate())
                + (row.rate() == null ? 0 : Keys.utf8Length(row.rate().name()) + Keys.utf8Length(row.rate().partition()))
                + (row.window() == null ? 0 : Keys.utf8Length(row.window().name()) + Keys.utf8Length(row.window().partition()));
    }

    private NewInstance toRow(JobRequest request, @Nullable Long parentId, @Nullable String traceContext) {
        String type = request.type();
        if (type == null || type.isBlank()) {
            throw new InvalidRequestException("type must not be blank");
        }
        Definition definition = definitions.get(type);
        if (definition == null && options.rejectUnknownTypes()) {
            throw new UnknownTypeException(type);
        }
        String queue = request.queue() != null ? request.queue()
                : definition != null ? definition.queue() : JobDefinition.DEFAULT_QUEUE;
        QueueNames.check("queue", queue);
        int maxAttempts = request.maxAttempts() != null ? request.maxAttempts()
                : definition != null ? definition.maxAttempts() : JobDefinition.DEFAULT_MAX_ATTEMPTS;
        if (maxAttempts < 1) {
            throw new InvalidRequestException("maxAttempts must be at least 1, was " + maxAttempts);
        }
        if (request.priority() < JobRequest.MIN_PRIORITY || request.priority() > JobRequest.MAX_PRIORITY) {
            throw new InvalidRequestException("priority must be " + JobRequest.MIN_PRIORITY + " to "
                    + JobRequest.MAX_PRIORITY + ", was " + request.priority());
        }
        long delayMillis = 0;
        if (request.runIn() != null) {
            if (request.runIn().isNegative()) {
                throw new InvalidRequestException("runIn must not be negative, was " + request.runIn());
            }
            if (request.runIn().compareTo(MAX_RUN_IN) > 0) {
                throw new InvalidRequestException("runIn must be at most " + MAX_RUN_IN.toDays() + " days, was "
                        + request.runIn());
            }
            delayMillis = request.runIn().toMillis();
        }
        if (request.runAt() != null && (request.runAt().isBefore(MIN_RUN_AT) || request.runAt().isAfter(MAX_RUN_AT))) {
            throw new InvalidRequestException("runAt must be between " + MIN_RUN_AT + " and " + MAX_RUN_AT
                    + ", was " + request.runAt());
        }
        if (request.concurrencyKey() != null && request.gate() == null) {
            checkKey("concurrencyKey", request.concurrencyKey());
        }
        String occupied = null;
        if (request.correlationKey() != null) {
            checkKey("correlationKey", request.correlationKey());
            if (request.occupiedStatuses().isEmpty()) {
                throw new InvalidRequestException("the occupied statuses of a correlation key must not be empty");
            }
            occupied = request.occupiedStatuses().stream().map(InstanceStatus::sqlName).sorted()
                    .collect(Collectors.joining(","));
        }
        ConflictPolicy onConflict = request.onConflict();
        if (onConflict == null) {
            throw new InvalidRequestException("onConflict must not be null (the default is ConflictPolicy.reject())");
        }
        if (onConflict.kind() != ConflictPolicy.Kind.REJECT) {
            if (request.correlationKey() == null) {
                throw new InvalidRequestException("onConflict " + onConflict + " needs a correlation key: the policy"
                        + " applies when a live instance holds the request's key");
            }
            if (parentId != null) {
                throw new InvalidRequestException("onConflict " + onConflict + " applies to inserts, not to children"
                        + " (a child's key is refused when live)");
            }
        }
        if (onConflict.kind() == ConflictPolicy.Kind.DEBOUNCE && (request.runAt() != null || request.runIn() != null)) {
            throw new InvalidRequestException("onConflict " + onConflict + " sets the run time itself (the window"
                    + " after the last insert); runAt and runIn must not be set with it");
        }
        int gateShards = 0;
        if (request.gate() != null) {
            gateShards = gate(request.gate()).shards();
            if (request.concurrencyKey() == null || Keys.utf8Length(request.concurrencyKey()) > JobRequest.MAX_KEY_BYTES) {
                throw new InvalidRequestException("the key of gate " + request.gate() + " must be at most "
                        + JobRequest.MAX_KEY_BYTES + " bytes in UTF-8, was "
                        + (request.concurrencyKey() == null ? "null" : Keys.utf8Length(request.concurrencyKey()) + " bytes"));
            }
            checkText("the key of gate " + request.gate(), request.concurrencyKey());
        }
        RateSlot rate = request.rateLimit();
        if (rate != null) {
            checkRate(rate.name(), rate.weight());
            if (rate.partition() != null) {
                checkKey("ratePartition", rate.partition());
            }
        }
        WindowSlot window = request.window();
        if (window != null) {
            checkWindow(window.name(), window.weight());
            if (rate != null && options.windows().containsKey(rate.name())
                    && !options.rateLimits().containsKey(rate.name())) {
                throw new InvalidRequestException("rateLimit " + rate.name() + " names a window and the request"
                        + " has window " + window.name() + " too: a row holds one window (take it with window())");
            }
            if (window.partition() != null) {
                checkKey("windowPartition", window.partition());
            }
        }
        String state = request.args() == null ? null : encode("arguments", request.args());
        ArgumentCheck.check(definition, request.args(), state, options.codec());
        String step = definition != null ? definition.initialStep() : JobDefinition.STEP;
        int version = definition != null ? definition.version() : 1;
        String fairnessKey = fairnessKey(queue, request);
        String concurrencyKey = request.concurrencyKey();
        String gate = request.gate();
        QueueOptions queueOptions = options.queues().get(queue);
        if (fairnessKey != null && gate == null && concurrencyKey == null && queueOptions != null
                && queueOptions.fairness().capsKeys()) {
            // The queue's per-key cap: the row holds the cap gate, keyed by its fairness key.
            gate = dev.durable.Fairness.capGate(queue);
            concurrencyKey = fairnessKey;
            gateShards = 1;
        }
        return new NewInstance(type, version, queue, request.priority(), step, state, maxAttempts,
                request.runAt() == null ? null : request.runAt().toString(), delayMillis, parentId,
                concurrencyKey, request.correlationKey(), occupied, gate, gateShards, rate, window, fairnessKey,
                onConflict, traceContext);
    }

    /**
     * The row's fairness key: the request's, checked; on a queue this engine runs with fairness, a
     * request without one shares the key "" (the fair pick reads only keyed rows).
     */
    private @Nullable String fairnessKey(String queue, JobRequest request) {
        if (request.fairnessKey() != null) {
            checkKey("fairnessKey", request.fairnessKey());
            return request.fairnessKey();
        }
        QueueOptions options = this.options.queues().get(queue);
        return options != null && options.fairness().enabled() ? "" : null;
    }

    /**
     * A transition's limit change with the row's fairness key moved as the outcome asks: a new key
     * is checked as an insert's is; a cleared key is the queue's default (as for a keyless insert).
     * On a queue that caps its keys, the row's next step holds the cap gate under its new key unless
     * it holds a gate or concurrency key of its own after the change (the rule of an insert).
     */
    public LimitChange withFairness(ClaimedRow row, Outcome.FairnessChange how, @Nullable String key,
            LimitChange change) {
        if (how == Outcome.FairnessChange.KEEP) {
            return change;
        }
        QueueOptions queue = options.queues().get(row.queue());
        String moved;
        if (how == Outcome.FairnessChange.SET) {
            checkKey("fairnessKey", key);
            moved = key;
        } else {
            moved = queue != null && queue.fairness().enabled() ? "" : null;
        }
        LimitChange fair = change.withFairness(how, moved);
        if (moved == null || queue == null || !queue.fairness().capsKeys()) {
            return fair;
        }
        String capGate = dev.durable.Fairness.capGate(row.queue());
        boolean capOrNothing = switch (change.keyChange()) {
            // The row's own key or gate stays: only the cap gate, or no key at all, takes the new cap.
            case KEEP -> row.gate() == null ? row.concurrencyKey() == null : capGate.equals(row.gate().name());
            case RELEASE -> true;
            case SET, GATE -> false;
        };
        return capOrNothing ? fair.withGate(capGate, moved, 1) : fair;
    }

    /** The configured gate of that name, or an {@link InvalidRequestException} naming it. */
    public Limits.Gate gate(String name) {
        Limits.Gate gate = options.gates().get(name);
        if (gate == null) {
            throw new InvalidRequestException("unknown gate '" + name + "': configure it with EngineOptions.gate"
                    + " (known: " + options.gates().keySet() + ")");
        }
        return gate;
    }

    /** Checks a window name and weight against the configured sliding windows. */
    public void checkWindow(String name, int weight) {
        Limits.Window window = options.windows().get(name);
        if (window == null) {
            throw new InvalidRequestException("unknown window '" + name
                    + "': configure it with EngineOptions.window (known: " + options.windows().keySet() + ")");
        }
        if (weight < 1 || weight > window.limit()) {
            throw new InvalidRequestException("weight of window " + name + " must be 1 to its limit "
                    + window.limit() + ", was " + weight);
        }
    }

    /** Checks a rate limit name and weight against the configured buckets. */
    public void checkRate(String name, int weight) {
        Limits.RateLimit limit = options.rateLimits().get(name);
        Limits.Window window = limit == null ? options.windows().get(name) : null;
        if (window != null) {
            // A sliding window in the rate slot: admitted as a bucket is, by its limit.
            if (weight < 1 || weight > window.limit()) {
                throw new InvalidRequestException("weight of window " + name + " must be 1 to its limit "
                        + window.limit() + ", was " + weight);
            }
            return;
        }
        if (limit == null) {
            throw new InvalidRequestException("unknown rate limit '" + name
                    + "': configure it with EngineOptions.rateLimit (known: " + options.rateLimits().keySet() + ")");
        }
        if (weight < 1 || weight > limit.burst()) {
            throw new InvalidRequestException("weight of rate limit " + name + " must be 1 to its burst "
                    + limit.burst() + ", was " + weight);
        }
    }

    /** JSON for a payload, within the engine's size limit. */
    public String encode(String what, Object value) {
        String json;
        try {
            json = options.codec().encode(value);
        } catch (RuntimeException unencodable) {
            throw new InvalidRequestException(what + " cannot be encoded as JSON: " + unencodable.getMessage());
        }
        String problem = textProblem(json);
        if (problem == null && hasEscapedNul(json)) {
            problem = "contains a NUL character (\\u0000)";
        }
        if (problem != null) {
            throw new InvalidRequestException(what + " cannot be stored: its JSON " + problem
                    + ", which PostgreSQL cannot hold");
        }
        int bytes = json.getBytes(StandardCharsets.UTF_8).length;
        if (bytes > options.maxPayloadBytes()) {
            throw new PayloadTooLargeException(what, bytes, options.maxPayloadBytes());
        }
        return json;
    }

    public static void checkName(String what, @Nullable String value) {
        if (value == null || value.isBlank() || value.length() > 128 || !value.strip().equals(value)) {
            throw new InvalidRequestException(what + " must be 1 to 128 characters with no leading or"
                    + " trailing blanks, was '" + value + "'");
        }
        checkText(what, value);
    }

    /**
     * A key: not blank, at most {@link JobRequest#MAX_KEY_BYTES} bytes in UTF-8 (what its index
     * holds is bytes, not characters), text PostgreSQL can hold.
     */
    public static void checkKey(String what, @Nullable String value) {
        String problem = Keys.problem(value);
        if (problem != null) {
            throw new InvalidRequestException(what + " " + problem);
        }
        checkText(what, value);
    }

    /**
     * PostgreSQL text holds neither NUL nor a lone UTF-16 surrogate: the first is refused with a raw
     * database error, the second silently stored as '?' (a different name than the caller's).
     */
    private static void checkText(String what, String value) {
        String problem = textProblem(value);
        if (problem != null) {
            throw new InvalidRequestException(what + " " + problem + ", which PostgreSQL cannot hold");
        }
    }

    private static @Nullable String textProblem(String value) {
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c == 0) {
                return "contains a NUL character (U+0000)";
            }
            if (Character.isHighSurrogate(c) && i + 1 < value.length() && Character.isLowSurrogate(value.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return "contains a lone surrogate (U+" + Integer.toHexString(c).toUpperCase() + "), not valid Unicode";
            }
        }
        return null;
    }

    /** A NUL escape (backslash, "u0000") in JSON text: an escape, not an escaped backslash followed by "u0000". */
    private static boolean hasEscapedNul(String json) {
        for (int i = json.indexOf("\\u0000"); i >= 0; i = json.indexOf("\\u0000", i + 1)) {
            int backslashes = 0;
            for (int j = i; j >= 0 && json.charAt(j) == '\\'; j--) {
                backslashes++;
            }
            if (backslashes % 2 == 1) {
                return true;
            }
        }
        return false;
    }
}
