package dev.durable.example;

import dev.durable.CancelResult;
import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.NoTargetException;
import dev.durable.SignalResult;
import java.time.Duration;
import java.util.List;
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
    private final DashboardQueries dashboard;
    private final Duration heartbeat;

    /** Completes every event stream when the application closes, so its graceful stop need not wait for them. */
    private final Sinks.Empty<Void> closing = Sinks.empty();

    public DurableController(DurableEngine engine, DashboardQueries dashboard,
            @Value("${example.events.heartbeat:15s}") Duration heartbeat) {
        this.engine = engine;
        this.dashboard = dashboard;
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
     * Retries a failed or cancelled instance by inserting a copy of its request: same type, queue,
     * priority, max attempts and keys, its stored arguments (for a workflow: the state it ended
     * with, from the first step). The original stays as it was, for the record.
     */
    @PostMapping("/instances/{id}/retry")
    @ResponseStatus(HttpStatus.CREATED)
    public Mono<Inserted> retry(@PathVariable long id) {
        return engine.get(id)
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to retry")))
                .flatMap(instance -> {
                    if (instance.status() != InstanceStatus.FAILED && instance.status() != InstanceStatus.CANCELLED) {
                        return Mono.error(new NotRetryableException(id, instance.status()));
                    }
                    return engine.insert(copyOf(instance));
                })
                .map(Inserted::new);
    }

    private JobRequest copyOf(Instance instance) {
        Object args = instance.stateJson() == null ? null : engine.codec().decode(instance.stateJson(), Object.class);
        JobRequest request = JobRequest.of(instance.type(), args).queue(instance.queue())
                .priority(instance.priority()).maxAttempts(instance.maxAttempts());
        if (instance.concurrencyKey() != null) {
            request = request.concurrencyKey(instance.concurrencyKey());
        }
        if (instance.correlationKey() != null) {
            request = request.correlationKey(instance.correlationKey());
        }
        return request;
    }

    /** Counts by status for every queue. */
    @GetMapping("/dashboard/queues")
    public Mono<List<DashboardQueries.QueueCounts>> queues() {
        return dashboard.queues();
    }

    /** The newest instances with their step and last error. */
    @GetMapping("/dashboard/instances")
    public Flux<DashboardQueries.InstanceView> recent(@RequestParam(defaultValue = "50") int limit) {
        if (limit < 1 || limit > 500) {
            return Flux.error(new InvalidRequestException("limit must be 1 to 500, was " + limit));
        }
        return dashboard.recent(limit);
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
