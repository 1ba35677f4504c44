package dev.durable;

import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * An engine that is running now, as the registry of live engines shows it: what it serves, and
 * since when. Each engine refreshes its entry with its heartbeat; an entry expires a lease TTL after
 * its engine stopped refreshing it (a crash), and is removed when its engine closes.
 *
 * @param origin the engine's identity (name, host, process and incarnation)
 * @param name the engine's configured name
 * @param queues the queues it runs
 * @param types the types it can run, with the version of each
 * @param startedAt when it registered
 * @param seenAt when it last refreshed its entry
 * @param lowestVersions the oldest version of each type it runs (types absent: every version down to 1); a
 *     workflow with state migrations runs only the versions it can migrate from
 */
public record LiveEngine(String origin, String name, List<String> queues, Map<String, Integer> types,
        Instant startedAt, Instant seenAt, Map<String, Integer> lowestVersions) {

    public LiveEngine {
        queues = List.copyOf(queues);
        types = Map.copyOf(types);
        lowestVersions = Map.copyOf(lowestVersions);
    }

    /** An engine that runs every version of its types down to 1. */
    public LiveEngine(String origin, String name, List<String> queues, Map<String, Integer> types, Instant startedAt,
            Instant seenAt) {
        this(origin, name, queues, types, startedAt, seenAt, Map.of());
    }

    /** The oldest version of {@code type} this engine runs. */
    public int lowestVersion(String type) {
        return lowestVersions.getOrDefault(type, 1);
    }
}
