package dev.durable.internal.client;

import dev.durable.LiveEngine;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * What an engine that runs no queues of its own (a client: never started, or inserting for others)
 * says about inserts into queues no live engine serves. A started engine knows the fleet from its
 * registry ({@code Registry.warnIfUnserved}); a client reads the registry, at most once a minute per
 * queue, after its insert and before the insert answers. A failed read only skips the warning.
 */
public final class ClientWarnings {

    private static final Logger log = Loggers.getLogger(ClientWarnings.class);
    private static final Duration EVERY = Duration.ofMinutes(1);

    private final Flux<LiveEngine> live;
    private final Map<String, Long> checked = new ConcurrentHashMap<>();

    public ClientWarnings(Flux<LiveEngine> live) {
        this.live = live;
    }

    public Mono<Void> inserted(Collection<String> queues) {
        long now = System.nanoTime();
        List<String> due = queues.stream().distinct().filter(queue -> {
            Long last = checked.get(queue);
            return (last == null || now - last > EVERY.toNanos()) && checked.put(queue, now) == last;
        }).toList();
        if (due.isEmpty()) {
            return Mono.empty();
        }
        return live.collectList().doOnNext(engines -> {
            for (String queue : due) {
                if (engines.stream().noneMatch(engine -> engine.queues().contains(queue))) {
                    log.warn("instances were inserted into queue '{}', which no live engine runs: they wait until"
                            + " an engine with that queue starts (live engines: {})", queue,
                            engines.stream().map(LiveEngine::name).distinct().toList());
                }
            }
        }).onErrorResume(error -> {
            log.debug("live engines not read for the unserved-queue check: {}", error.toString());
            return Mono.empty();
        }).then();
    }
}
