package dev.durable.example;

import dev.durable.CancelResult;
import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InvalidRequestException;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.NoTargetException;
import dev.durable.SignalResult;
import java.time.Duration;
import java.util.Map;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.event.ContextClosedEvent;
import org.springframework.context.event.EventListener;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The example's HTTP API over the engine. Every handler returns the engine's {@code Mono}/{@code Flux}
 * as is: nothing here blocks an event-loop thread. Errors become statuses in {@link ApiErrors}.
 */
@RestController
@RequestMapping("/api")
public class DurableController {

    /** Events one SSE client may fall behind by before the oldest are dropped for it. */
    private static final int SSE_BUFFER = 256;

    private final DurableEngine engine;
    private final Duration heartbeat;

    /** Completes every event stream when the application closes, so its graceful stop need not wait for them. */
    private final Sinks.Empty<Void> closing = Sinks.empty();

    public DurableController(DurableEngine engine, @Value("${example.events.heartbeat:15s}") Duration heartbeat) {
        this.engine = engine;
        this.heartbeat = heartbeat;
    }

    /**
     * The application is closing: end the event streams first. An open stream would hold the web
     * server's graceful stop for its whole timeout, and {@code spring-boot:run} kills a process that
     * has not exited 5 s after Ctrl-C (exit code 143, which Maven reports as BUILD FAILURE).
     */
    @EventListener(ContextClosedEvent.class)
    void closing() {
        closing.tryEmitEmpty();
    }

    /** Inserts a job: {@code {"type": "greet", "args": "ada"}}, with optional routing and keys. */
    @PostMapping("/jobs")
    @ResponseStatus(HttpStatus.CREATED)
    public Mono<Inserted> insertJob(@RequestBody InsertRequest request) {
        return engine.insert(request.toJobRequest(request.args())).map(Inserted::new);
    }

    /** Inserts a workflow instance: {@code {"type": "order", "state": {"item": "book"}}}. */
    @PostMapping("/workflows")
    @ResponseStatus(HttpStatus.CREATED)
    public Mono<Inserted> insertWorkflow(@RequestBody InsertRequest request) {
        return engine.insert(request.toJobRequest(request.state())).map(Inserted::new);
    }

    @GetMapping("/instances/{id}")
    public Mono<Instance> instance(@PathVariable long id) {
        return engine.get(id).switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "")));
    }

    /** Sends signal {@code name} to instance {@code id}; the body, if any, is its JSON payload. */
    @PostMapping("/instances/{id}/signals/{name}")
    public Mono<Map<String, SignalResult>> signal(@PathVariable long id, @PathVariable String name,
            @RequestBody(required = false) @Nullable Object payload, @RequestParam(required = false) @Nullable String dedupKey) {
        return engine.signal(id, name, payload, dedupKey).map(result -> Map.of("result", result));
    }

    /** Sends signal {@code name} to the live instance holding {@code correlationKey}. */
    @PostMapping("/correlations/{correlationKey}/signals/{name}")
    public Mono<Map<String, SignalResult>> signalByKey(@PathVariable String correlationKey, @PathVariable String name,
            @RequestBody(required = false) @Nullable Object payload, @RequestParam(required = false) @Nullable String dedupKey) {
        return engine.signal(correlationKey, name, payload, dedupKey).map(result -> Map.of("result", result));
    }

    @PostMapping("/instances/{id}/cancel")
    public Mono<Map<String, CancelResult>> cancel(@PathVariable long id,
            @RequestParam(defaultValue = "false") boolean cascade) {
        return engine.cancel(id, cascade)
                .flatMap(result -> result == CancelResult.NOT_FOUND
                        ? Mono.error(NoTargetException.noInstance(id, "to cancel"))
                        : Mono.just(Map.of("result", result)));
    }

    /**
     * Retries a failed or cancelled instance in place ({@code engine.admin().retry}): the same id, args
     * and state, from the step it failed at, with a fresh attempt budget.
     */
    @PostMapping("/instances/{id}/retry")
    public Mono<Inserted> retry(@PathVariable long id) {
        return engine.admin().retry(id).map(instance -> new Inserted(instance.id()));
    }

    /**
     * The engine's job events as Server-Sent Events, optionally of one queue or type. Each client
     * gets a bounded buffer that drops its oldest events when it reads too slowly (the engine's own
     * stream already never waits for anyone), and a comment every {@code example.events.heartbeat}
     * keeps idle connections open through proxies and lets the server notice a client that left.
     */
    @GetMapping(path = "/events", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    public Flux<ServerSentEvent<EventView>> events(@RequestParam(required = false) @Nullable String queue,
            @RequestParam(required = false) @Nullable String type) {
        Predicate<JobEvent> wanted = event -> true;
        if (queue != null) {
            wanted = wanted.and(JobEvent.ofQueue(queue));
        }
        if (type != null) {
            wanted = wanted.and(JobEvent.ofType(type));
        }
        Flux<ServerSentEvent<EventView>> events = engine.events()
                .filter(wanted)
                .onBackpressureBuffer(SSE_BUFFER, dropped -> { }, reactor.core.publisher.BufferOverflowStrategy.DROP_OLDEST)
                .map(event -> ServerSentEvent.builder(EventView.of(event))
                        .id(Long.toString(event.id())).event("job").build());
        Flux<ServerSentEvent<EventView>> heartbeats = Flux.interval(heartbeat)
                .onBackpressureDrop()
                .map(tick -> ServerSentEvent.<EventView>builder().comment("heartbeat").build());
        // A first comment flushes the response headers at once, so EventSource opens immediately.
        return Flux.merge(events, heartbeats)
                .startWith(ServerSentEvent.<EventView>builder().comment("connected").build())
                .takeUntilOther(closing.asMono())
                .limitRate(64);
    }

    /** What an insert answers. */
    public record Inserted(long id) {
    }

    /**
     * The body of an insert. {@code args} (jobs) or {@code state} (workflows) is any JSON value.
     *
     * @param runInSeconds delay before the first run, if any
     */
    public record InsertRequest(String type, @Nullable Object args, @Nullable Object state, @Nullable String queue,
            @Nullable Integer priority, @Nullable Integer maxAttempts, @Nullable String concurrencyKey,
            @Nullable String correlationKey, @Nullable Long runInSeconds) {

        JobRequest toJobRequest(@Nullable Object value) {
            if (type == null || type.isBlank()) {
                throw new InvalidRequestException("type must not be blank");
            }
            JobRequest request = JobRequest.of(type, value);
            if (queue != null && !queue.isBlank()) {
                request = request.queue(queue);
            }
            if (priority != null) {
                request = request.priority(priority);
            }
            if (maxAttempts != null) {
                request = request.maxAttempts(maxAttempts);
            }
            if (concurrencyKey != null && !concurrencyKey.isBlank()) {
                request = request.concurrencyKey(concurrencyKey);
            }
            if (correlationKey != null && !correlationKey.isBlank()) {
                request = request.correlationKey(correlationKey);
            }
            if (runInSeconds != null) {
                request = request.runIn(Duration.ofSeconds(runInSeconds));
            }
            return request;
        }
    }

    /** One job event as the SSE stream sends it (times as ISO text, the run's duration in ms). */
    public record EventView(String kind, long id, @Nullable String type, String queue, @Nullable String step,
            int attempt, String at, @Nullable Long durationMs, @Nullable String error) {

        static EventView of(JobEvent event) {
            return new EventView(event.kind().name(), event.id(), event.type(), event.queue(), event.step(),
                    event.attempt(), event.at().toString(),
                    event.duration() == null ? null : event.duration().toMillis(), event.error());
        }
    }
}
