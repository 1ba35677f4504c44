package dev.durable.dashboard.internal;

import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.admin.InstanceFilter;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.util.MultiValueMap;

/**
 * The instance filter as a form: every field of {@link InstanceFilter} has a parameter, read from a query
 * (the search) or a posted form (a bulk action), and written back into links and hidden fields so paging
 * and bulk actions keep the filter.
 */
public final class FilterForm {

    /** The parameters, in the order the form shows them. */
    public static final List<String> FIELDS = List.of("queue", "type", "status", "key", "keyPrefix", "contains",
            "error", "insertedFrom", "insertedTo", "updatedFrom", "updatedTo", "eligibleFrom", "eligibleTo",
            "parent", "version");

    private final Map<String, List<String>> values;

    private FilterForm(Map<String, List<String>> values) {
        this.values = values;
    }

    /** The filter parameters of a request; blank values are dropped. */
    public static FilterForm of(MultiValueMap<String, String> params) {
        Map<String, List<String>> values = new LinkedHashMap<>();
        for (String field : FIELDS) {
            List<String> given = params.get(field);
            if (given == null) {
                continue;
            }
            List<String> kept = new ArrayList<>();
            for (String value : given) {
                for (String part : field.equals("queue") || field.equals("type") || field.equals("status")
                        ? value.split(",") : new String[] {value}) {
                    if (!part.isBlank()) {
                        kept.add(part.strip());
                    }
                }
            }
            if (!kept.isEmpty()) {
                values.put(field, List.copyOf(kept));
            }
        }
        return new FilterForm(values);
    }

    public boolean isEmpty() {
        return values.isEmpty();
    }

    public @Nullable String first(String field) {
        List<String> list = values.get(field);
        return list == null ? null : list.get(0);
    }

    public List<String> all(String field) {
        return values.getOrDefault(field, List.of());
    }

    /** (field, value) pairs: for hidden fields and query strings. */
    public List<Map.Entry<String, String>> pairs() {
        List<Map.Entry<String, String>> pairs = new ArrayList<>();
        values.forEach((field, list) -> list.forEach(value -> pairs.add(Map.entry(field, value))));
        return pairs;
    }

    /** {@code a=1&b=2}, each part URL-encoded; empty without a filter. */
    public String query() {
        StringBuilder query = new StringBuilder();
        for (Map.Entry<String, String> pair : pairs()) {
            if (query.length() > 0) {
                query.append('&');
            }
            query.append(Html.url(pair.getKey())).append('=').append(Html.url(pair.getValue()));
        }
        return query.toString();
    }

    /** The filter; a value that does not parse is an {@link InvalidRequestException} naming its field. */
    public InstanceFilter filter() {
        InstanceFilter.Builder b = InstanceFilter.builder();
        if (values.containsKey("queue")) {
            b.queue(all("queue").toArray(String[]::new));
        }
        if (values.containsKey("type")) {
            b.type(all("type").toArray(String[]::new));
        }
        if (values.containsKey("status")) {
            Set<InstanceStatus> statuses = EnumSet.noneOf(InstanceStatus.class);
            for (String status : all("status")) {
                try {
                    statuses.add(InstanceStatus.fromSql(status));
                } catch (IllegalArgumentException e) {
                    throw new InvalidRequestException("status: unknown status '" + status + "'");
                }
            }
            b.status(statuses);
        }
        String key = first("key");
        if (key != null) {
            b.correlationKey(key);
        }
        String prefix = first("keyPrefix");
        if (prefix != null) {
            b.correlationKeyPrefix(prefix);
        }
        String contains = first("contains");
        if (contains != null) {
            b.stateContains(contains);
        }
        String error = first("error");
        if (error != null) {
            b.errorContains(error);
        }
        b.insertedBetween(instant("insertedFrom"), instant("insertedTo"));
        b.updatedBetween(instant("updatedFrom"), instant("updatedTo"));
        b.eligibleBetween(instant("eligibleFrom"), instant("eligibleTo"));
        String parent = first("parent");
        if (parent != null) {
            try {
                b.parentId(Long.parseLong(parent));
            } catch (NumberFormatException e) {
                throw new InvalidRequestException("parent: not an instance id: '" + parent + "'");
            }
        }
        String version = first("version");
        if (version != null) {
            try {
                b.typeVersion(Integer.parseInt(version));
            } catch (NumberFormatException e) {
                throw new InvalidRequestException("version: not a type version: '" + version + "'");
            }
        }
        return b.build();
    }

    /** An ISO instant, or a date-time without zone (what a datetime-local input sends) read as UTC. */
    private @Nullable Instant instant(String field) {
        String value = first(field);
        if (value == null) {
            return null;
        }
        try {
            return Instant.parse(value);
        } catch (DateTimeParseException notInstant) {
            try {
                return LocalDateTime.parse(value).toInstant(ZoneOffset.UTC);
            } catch (DateTimeParseException e) {
                throw new InvalidRequestException(field + ": not a time (2026-12-03T04:00 or 2026-12-03T04:00:00Z): '"
                        + value + "'");
            }
        }
    }
}
