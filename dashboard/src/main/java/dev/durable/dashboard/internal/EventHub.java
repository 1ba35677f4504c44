package dev.durable.dashboard.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.DurableEngine;
import dev.durable.JobEvent;
import dev.durable.QueueStats;
import dev.durable.admin.StatusCount;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.http.codec.ServerSentEvent;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * What every viewer's live feed shares: one subscription to the engine's events, replayed (the last
 * {@value #RECENT}) to each viewer that connects and multicast after; one counts refresh, read from the
 * database every interval while at least one viewer is connected and multicast to all of them (never a
 * read per viewer); the per-minute ring behind the overview's chart.
 */
public final class EventHub implements Disposable {

    private static final Logger log = Loggers.getLogger(EventHub.class);
    static final int RECENT = 50;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final DurableEngine engine;
    private final Sinks.Many<JobEvent> recent = Sinks.many().replay().limit(RECENT);
    private final ArrayDeque<JobEvent> last = new ArrayDeque<>(RECENT);
    private final MinuteRing ring = new MinuteRing();
    private final Flux<List<StatusCount>> counts;
    private final Disposable subscription;

    public EventHub(DurableEngine engine, Duration countsInterval) {
        this.engine = engine;
        this.subscription = engine.events().subscribe(this::accept,
                error -> log.warn("dashboard event feed ended: {}", error.toString()));
        this.counts = Flux.interval(Duration.ZERO, countsInterval)
                .onBackpressureDrop()
                .concatMap(tick -> engine.admin().counts().onErrorResume(error -> Mono.empty()), 1)
                .replay(1)
                .refCount(1, Duration.ofSeconds(5));
    }

    private void accept(JobEvent event) {
        ring.record(event);
        synchronized (last) {
            if (last.size() == RECENT) {
                last.removeFirst();
            }
            last.addLast(event);
        }
        // The engine's subscriber calls are serialized: the only reason to fail is a full downstream, dropped.
        recent.tryEmitNext(event);
    }

    public MinuteRing.Snapshot chart() {
        return ring.snapshot(Instant.now().getEpochSecond());
    }

    /** The events replayed now, oldest first. */
    public List<JobEvent> recentEvents() {
        synchronized (last) {
            return new ArrayList<>(last);
        }
    }

    /** One viewer's stream: the replayed and live events, the shared counts, a keep-alive comment. */
    public Flux<ServerSentEvent<String>> stream() {
        Flux<ServerSentEvent<String>> events = recent.asFlux()
                .map(event -> ServerSentEvent.builder(json(event(event))).event("job").build());
        Flux<ServerSentEvent<String>> countsEvents = counts
                .map(list -> ServerSentEvent.builder(json(counts(list))).event("counts").build());
        Flux<ServerSentEvent<String>> keepAlive = Flux.interval(Duration.ofSeconds(15))
                .onBackpressureDrop()
                .map(tick -> ServerSentEvent.<String>builder().comment("keep-alive").build());
        return Flux.merge(events, countsEvents, keepAlive);
    }

    private static Map<String, Object> event(JobEvent event) {
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("kind", event.kind().name());
        json.put("id", event.id());
        json.put("type", event.type());
        json.put("queue", event.queue());
        json.put("step", event.step());
        json.put("attempt", event.attempt());
        json.put("at", Html.time(event.at()));
        json.put("ts", event.at().toEpochMilli());
        json.put("error", event.error());
        return json;
    }

    private Map<String, Object> counts(List<StatusCount> list) {
        // As the page writes them: an estimate (a big history's settled rows) is marked with ~.
        Map<String, Map<String, String>> byQueue = new LinkedHashMap<>();
        for (StatusCount count : list) {
            byQueue.computeIfAbsent(count.queue(), queue -> new LinkedHashMap<>())
                    .put(count.status().sqlName(), (count.estimated() ? "~" : "") + count.count());
        }
        Map<String, Map<String, Integer>> now = new LinkedHashMap<>();
        for (QueueStats stats : engine.queueStats()) {
            now.put(stats.queue(), Map.of("running", stats.running(), "buffered", stats.buffered()));
        }
        MinuteRing.Snapshot chart = chart();
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("counts", byQueue);
        json.put("now", now);
        json.put("completed", chart.completed());
        json.put("failed", chart.failed());
        return json;
    }

    private static String json(Object value) {
        try {
            return JSON.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("maps of strings and numbers always serialize", e);
        }
    }

    @Override
    public void dispose() {
        subscription.dispose();
        recent.tryEmitComplete();
    }

    @Override
    public boolean isDisposed() {
        return subscription.isDisposed();
    }
}
