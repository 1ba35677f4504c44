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
 */
public record LiveEngine(String origin, String name, List<String> queues, Map<String, Integer> types,
        Instant startedAt, Instant seenAt) {

    public LiveEngine {
        queues = List.copyOf(queues);
        types = Map.copyOf(types);
    }
}
