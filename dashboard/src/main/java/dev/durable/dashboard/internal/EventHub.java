package dev.durable.dashboard.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.DurableEngine;
import dev.durable.JobEvent;
import dev.durable.QueueStats;
import dev.durable.admin.QueueDepth;
import dev.durable.admin.StatusCount;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.http.codec.ServerSentEvent;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * What every viewer's live feed shares: one subscription to the engine's events, replayed (the last
 * {@value #RECENT}) to each viewer that connects and multicast after; one refresh of the counts, the rows
 * due now and the last hour's activity, read from the database every interval (longer when a refresh is slow)
 * while at least one viewer is connected and multicast to all of them (never a read per viewer).
 */
public final class EventHub implements Disposable {

    private static final Logger log = Loggers.getLogger(EventHub.class);
    static final int RECENT = 50;
    /** The longest a slow refresh makes the next one wait. */
    private static final Duration SLOWEST_REFRESH = Duration.ofMinutes(1);
    private static final ObjectMapper JSON = new ObjectMapper();

    private final DurableEngine engine;
    private final Sinks.Many<JobEvent> recent = Sinks.many().replay().limit(RECENT);
    private final ArrayDeque<JobEvent> last = new ArrayDeque<>(RECENT);
    private final Flux<Refresh> refreshes;
    private volatile long lastRefreshNanos;
    private final Disposable subscription;

    public EventHub(DurableEngine engine, Duration countsInterval) {
        this.engine = engine;
        this.subscription = engine.events().subscribe(this::accept,
                error -> log.warn("dashboard event feed ended: {}", error.toString()));
        // The next refresh waits the interval, or nine times what the last one took if that is longer (that at
        // most a minute): on a big backlog (a million due rows: about half a second of counting) watching the
        // dashboard costs the database at most a tenth of one core. A failed refresh is not timed: it waits the
        // interval, and the feed catches up once the database answers again.
        this.refreshes = Mono.defer(() -> {
                    long started = System.nanoTime();
                    return refresh().doOnNext(done -> lastRefreshNanos = System.nanoTime() - started);
                })
                .onErrorResume(error -> {
                    lastRefreshNanos = 0;
                    log.debug("dashboard refresh failed: {}", error.toString());
                    return Mono.empty();
                })
                .repeatWhen(done -> done.concatMap(any -> Mono.delay(Duration.ofNanos(Math.max(countsInterval.toNanos(),
                        Math.min(SLOWEST_REFRESH.toNanos(), 9 * lastRefreshNanos))))))
                .replay(1)
                .refCount(1, Duration.ofSeconds(5));
    }

    /** What one refresh read: the counts by queue and status, the rows due now, the last hour's chart. */
    private record Refresh(List<StatusCount> counts, List<QueueDepth> depths, ActivityChart chart) {
    }

    private Mono<Refresh> refresh() {
        return Mono.zip(engine.admin().counts(), engine.admin().depths(), chart(ActivityChart.Range.HOUR, null))
                .map(read -> new Refresh(read.getT1(), read.getT2(), read.getT3()));
    }

    /** The fleet's activity over {@code range}, of one queue or (null) every queue. */
    public Mono<ActivityChart> chart(ActivityChart.Range range, @Nullable String queue) {
        return engine.admin().activity(range.window, range.bucket, queue)
                .map(activity -> ActivityChart.of(range, queue, activity, Instant.now()));
    }

    private void accept(JobEvent event) {
        synchronized (last) {
            if (last.size() == RECENT) {
                last.removeFirst();
            }
            last.addLast(event);
        }
        // The engine's subscriber calls are serialized: the only reason to fail is a full downstream, dropped.
        recent.tryEmitNext(event);
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
        Flux<ServerSentEvent<String>> countsEvents = refreshes
                .map(refresh -> ServerSentEvent.builder(json(counts(refresh))).event("counts").build());
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

    private Map<String, Object> counts(Refresh refresh) {
        // As the page writes them: an estimate (a big history's settled rows) is marked with ~.
        Map<String, Map<String, String>> byQueue = new LinkedHashMap<>();
        for (StatusCount count : refresh.counts()) {
            byQueue.computeIfAbsent(count.queue(), queue -> new LinkedHashMap<>())
                    .put(count.status().sqlName(), (count.estimated() ? "~" : "") + count.count());
        }
        Map<String, Map<String, Object>> now = new LinkedHashMap<>();
        for (QueueStats stats : engine.queueStats()) {
            now.computeIfAbsent(stats.queue(), queue -> new LinkedHashMap<>()).putAll(
                    Map.of("running", stats.running(), "committing", stats.committing(), "buffered", stats.buffered()));
        }
        for (QueueDepth depth : refresh.depths()) {
            now.computeIfAbsent(depth.queue(), queue -> new LinkedHashMap<>()).putAll(
                    Map.of("due", depth.due(), "wait", OverviewPage.wait(depth.oldestWait())));
        }
        ActivityChart chart = refresh.chart();
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("counts", byQueue);
        json.put("now", now);
        json.put("completed", chart.completed());
        json.put("failed", chart.failed());
        json.put("retried", chart.retried());
        json.put("bucket", chart.bucketLabel());
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
