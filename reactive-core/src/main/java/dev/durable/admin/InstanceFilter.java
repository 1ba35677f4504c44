package dev.durable.admin;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import java.time.Instant;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Which instances a listing, a count or a bulk action is about: every condition given must hold (an
 * empty filter matches every instance). Immutable; build one with {@link #builder()}. Time ranges are
 * half open, {@code [from, to)}; "updated" is the last change of a live instance and the time a settled
 * one settled.
 */
public final class InstanceFilter {

    private static final ObjectMapper JSON = new ObjectMapper();

    private final List<String> queues;
    private final List<String> types;
    private final Set<InstanceStatus> statuses;
    private final @Nullable String correlationKey;
    private final @Nullable String correlationKeyPrefix;
    private final @Nullable String stateContains;
    private final @Nullable String errorContains;
    private final @Nullable Instant insertedFrom;
    private final @Nullable Instant insertedTo;
    private final @Nullable Instant updatedFrom;
    private final @Nullable Instant updatedTo;
    private final @Nullable Instant eligibleFrom;
    private final @Nullable Instant eligibleTo;
    private final @Nullable Long parentId;
    private final @Nullable Integer typeVersionFrom;
    private final @Nullable Integer typeVersionTo;

    private InstanceFilter(Builder b) {
        this.queues = List.copyOf(b.queues);
        this.types = List.copyOf(b.types);
        this.statuses = b.statuses.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(b.statuses));
        this.correlationKey = b.correlationKey;
        this.correlationKeyPrefix = b.correlationKeyPrefix;
        this.stateContains = b.stateContains;
        this.errorContains = b.errorContains;
        this.insertedFrom = b.insertedFrom;
        this.insertedTo = b.insertedTo;
        this.updatedFrom = b.updatedFrom;
        this.updatedTo = b.updatedTo;
        this.eligibleFrom = b.eligibleFrom;
        this.eligibleTo = b.eligibleTo;
        this.parentId = b.parentId;
        this.typeVersionFrom = b.typeVersionFrom;
        this.typeVersionTo = b.typeVersionTo;
    }

    /** Every instance. */
    public static InstanceFilter all() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder that starts from this filter. */
    public Builder mutate() {
        Builder b = new Builder();
        b.queues = queues;
        b.types = types;
        b.statuses = statuses;
        b.correlationKey = correlationKey;
        b.correlationKeyPrefix = correlationKeyPrefix;
        b.stateContains = stateContains;
        b.errorContains = errorContains;
        b.insertedFrom = insertedFrom;
        b.insertedTo = insertedTo;
        b.updatedFrom = updatedFrom;
        b.updatedTo = updatedTo;
        b.eligibleFrom = eligibleFrom;
        b.eligibleTo = eligibleTo;
        b.parentId = parentId;
        b.typeVersionFrom = typeVersionFrom;
        b.typeVersionTo = typeVersionTo;
        return b;
    }

    /** Any of these queues; empty for every queue. */
    public List<String> queues() {
        return queues;
    }

    /** Any of these types; empty for every type. */
    public List<String> types() {
        return types;
    }

    /** Any of these statuses; empty for every status. */
    public Set<InstanceStatus> statuses() {
        return statuses;
    }

    public @Nullable String correlationKey() {
        return correlationKey;
    }

    public @Nullable String correlationKeyPrefix() {
        return correlationKeyPrefix;
    }

    /** JSON the args (a job's) or state (a workflow's) must contain, as PostgreSQL's {@code @>}. */
    public @Nullable String stateContains() {
        return stateContains;
    }

    /** Text the last error must contain, case-insensitively. */
    public @Nullable String errorContains() {
        return errorContains;
    }

    public @Nullable Instant insertedFrom() {
        return insertedFrom;
    }

    public @Nullable Instant insertedTo() {
        return insertedTo;
    }

    public @Nullable Instant updatedFrom() {
        return updatedFrom;
    }

    public @Nullable Instant updatedTo() {
        return updatedTo;
    }

    public @Nullable Instant eligibleFrom() {
        return eligibleFrom;
    }

    public @Nullable Instant eligibleTo() {
        return eligibleTo;
    }

    /** Children of this instance only. */
    public @Nullable Long parentId() {
        return parentId;
    }

    /** The lowest type version matched (inclusive), or null for no bound. */
    public @Nullable Integer typeVersionFrom() {
        return typeVersionFrom;
    }

    /** The highest type version matched (inclusive), or null for no bound. */
    public @Nullable Integer typeVersionTo() {
        return typeVersionTo;
    }

    /** True when no settled status can match: the history need not be read. */
    public boolean liveOnly() {
        return !statuses.isEmpty() && statuses.stream().noneMatch(InstanceStatus::isTerminal);
    }

    @Override
    public String toString() {
        return "InstanceFilter{queues=" + queues + ", types=" + types + ", statuses=" + statuses
                + ", correlationKey=" + correlationKey + ", correlationKeyPrefix=" + correlationKeyPrefix
                + ", stateContains=" + stateContains + ", errorContains=" + errorContains + ", inserted=["
                + insertedFrom + ", " + insertedTo + "), updated=[" + updatedFrom + ", " + updatedTo
                + "), eligible=[" + eligibleFrom + ", " + eligibleTo + "), parentId=" + parentId
                + ", typeVersions=[" + typeVersionFrom + ", " + typeVersionTo + "]}";
    }

    /** Builds a filter; each setter checks its argument, {@link #build()} the ranges. */
    public static final class Builder {

        private List<String> queues = List.of();
        private List<String> types = List.of();
        private Set<InstanceStatus> statuses = Set.of();
        private @Nullable String correlationKey;
        private @Nullable String correlationKeyPrefix;
        private @Nullable String stateContains;
        private @Nullable String errorContains;
        private @Nullable Instant insertedFrom;
        private @Nullable Instant insertedTo;
        private @Nullable Instant updatedFrom;
        private @Nullable Instant updatedTo;
        private @Nullable Instant eligibleFrom;
        private @Nullable Instant eligibleTo;
        private @Nullable Long parentId;
        private @Nullable Integer typeVersionFrom;
        private @Nullable Integer typeVersionTo;

        private Builder() {
        }

        public Builder queue(String... queues) {
            this.queues = names("queue", queues);
            return this;
        }

        public Builder type(String... types) {
            this.types = names("type", types);
            return this;
        }

        public Builder status(InstanceStatus... statuses) {
            this.statuses = Set.of(statuses);
            return this;
        }

        public Builder status(Set<InstanceStatus> statuses) {
            this.statuses = Set.copyOf(statuses);
            return this;
        }

        /** The instance with exactly this correlation key (live or settled, whatever its occupied statuses). */
        public Builder correlationKey(String key) {
            this.correlationKey = nonEmpty("correlationKey", key);
            return this;
        }

        /** Instances whose correlation key starts with {@code prefix}. */
        public Builder correlationKeyPrefix(String prefix) {
            this.correlationKeyPrefix = nonEmpty("correlationKeyPrefix", prefix);
            return this;
        }

        /**
         * Instances whose args (a job's) or state (a workflow's) contain this JSON, as PostgreSQL's
         * {@code jsonb @>}: {@code {"customer": 42}} matches every state with that member.
         */
        public Builder stateContains(String json) {
            try {
                JSON.readTree(json);
            } catch (JsonProcessingException e) {
                throw new InvalidRequestException("stateContains must be JSON: " + e.getOriginalMessage());
            }
            this.stateContains = nonEmpty("stateContains", json);
            return this;
        }

        /** Instances whose last error contains {@code text}, case-insensitively. */
        public Builder errorContains(String text) {
            this.errorContains = nonEmpty("errorContains", text);
            return this;
        }

        public Builder insertedBetween(@Nullable Instant from, @Nullable Instant to) {
            this.insertedFrom = from;
            this.insertedTo = to;
            return this;
        }

        public Builder updatedBetween(@Nullable Instant from, @Nullable Instant to) {
            this.updatedFrom = from;
            this.updatedTo = to;
            return this;
        }

        public Builder eligibleBetween(@Nullable Instant from, @Nullable Instant to) {
            this.eligibleFrom = from;
            this.eligibleTo = to;
            return this;
        }

        public Builder parentId(long parentId) {
            this.parentId = parentId;
            return this;
        }

        /** Instances whose type version is {@code version} (a workflow's {@code version(n)}; jobs are 1). */
        public Builder typeVersion(int version) {
            return typeVersionBetween(version, version);
        }

        /**
         * Instances whose type version is between {@code lowest} and {@code highest}, both included;
         * a null bound is open (all instances of a workflow older than version 3: {@code (null, 2)}).
         */
        public Builder typeVersionBetween(@Nullable Integer lowest, @Nullable Integer highest) {
            if (lowest != null && highest != null && lowest > highest) {
                throw new InvalidRequestException("type version range is empty: " + lowest + " is above " + highest);
            }
            this.typeVersionFrom = lowest;
            this.typeVersionTo = highest;
            return this;
        }

        public InstanceFilter build() {
            range("inserted", insertedFrom, insertedTo);
            range("updated", updatedFrom, updatedTo);
            range("eligible", eligibleFrom, eligibleTo);
            if (correlationKey != null && correlationKeyPrefix != null) {
                throw new InvalidRequestException("give correlationKey or correlationKeyPrefix, not both");
            }
            return new InstanceFilter(this);
        }

        private static void range(String name, @Nullable Instant from, @Nullable Instant to) {
            if (from != null && to != null && !from.isBefore(to)) {
                throw new InvalidRequestException(name + " range is empty: from " + from + " is not before " + to);
            }
        }

        private static List<String> names(String what, String... names) {
            for (String name : names) {
                nonEmpty(what, name);
            }
            return List.of(names);
        }

        private static String nonEmpty(String what, @Nullable String value) {
            if (value == null || value.isEmpty()) {
                throw new InvalidRequestException(what + " must not be empty");
            }
            if (value.indexOf('\0') >= 0) {
                throw new InvalidRequestException(what + " must not contain NUL");
            }
            return value;
        }
    }
}
