package dev.durable.observation;

import static org.assertj.core.api.Assertions.assertThat;

import brave.Tracing;
import brave.handler.MutableSpan;
import brave.handler.SpanHandler;
import brave.propagation.ThreadLocalCurrentTraceContext;
import brave.sampler.Sampler;
import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler.FirstMatchingCompositeObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.brave.bridge.BraveBaggageManager;
import io.micrometer.tracing.brave.bridge.BraveCurrentTraceContext;
import io.micrometer.tracing.brave.bridge.BravePropagator;
import io.micrometer.tracing.brave.bridge.BraveTracer;
import io.micrometer.tracing.brave.bridge.W3CPropagation;
import io.micrometer.tracing.handler.DefaultTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingReceiverTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingSenderTracingObservationHandler;
import io.micrometer.tracing.handler.TracingObservationHandler;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * The trace context of inserts and signals, stored with the rows and followed by each run, with a
 * real Micrometer Tracing bridge (Brave, W3C propagation, spans kept in memory) on the real database.
 */
@ExtendWith(PostgresExtension.class)
class TracingIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final Engines engines = new Engines();

    private final List<MutableSpan> spans = new CopyOnWriteArrayList<>();
    private TestDatabase db;
    private Tracing tracing;
    private BraveTracer tracer;
    private BravePropagator propagator;
    private ObservationRegistry observationRegistry;
    /** The engine {@link #ship} inserts with. */
    private DurableEngine engine;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
        ThreadLocalCurrentTraceContext current = ThreadLocalCurrentTraceContext.newBuilder().build();
        tracing = Tracing.newBuilder()
                .currentTraceContext(current)
                .traceId128Bit(true)
                .supportsJoin(false)
                .propagationFactory(new W3CPropagation())
                .sampler(Sampler.ALWAYS_SAMPLE)
                .addSpanHandler(new SpanHandler() {
                    @Override
                    public boolean end(brave.propagation.TraceContext context, MutableSpan span, Cause cause) {
                        spans.add(span);
                        return true;
                    }
                })
                .build();
        tracer = new BraveTracer(tracing.tracer(), new BraveCurrentTraceContext(current), new BraveBaggageManager());
        propagator = new BravePropagator(tracing);
        observationRegistry = ObservationRegistry.create();
        // As Spring Boot groups tracing handlers: the first that supports a context handles it.
        // tag::handlers[]
        // Durable's handler first: it only takes Durable's runs; the first matching handler handles a context.
        observationRegistry.observationConfig().observationHandler(new FirstMatchingCompositeObservationHandler(
                new DurableTracingObservationHandler(tracer, propagator),
                new PropagatingSenderTracingObservationHandler<>(tracer, propagator),
                new PropagatingReceiverTracingObservationHandler<>(tracer, propagator),
                new DefaultTracingObservationHandler(tracer)));
        // end::handlers[]
    }

    @AfterEach
    void tearDown() {
        tracing.close();
    }

    private DurableEngine start(String queue, boolean traced, dev.durable.Definition... definitions) {
        EngineOptions.Builder options = engines.options(queue)
                .queue(QueueOptions.builder(queue).concurrency(4).pollInterval(Duration.ofMillis(100)).build());
        if (!traced) {
            return engines.start(options.observationRegistry(observationRegistry), definitions);
        }
        // tag::without-spring[]
        options.observationRegistry(observationRegistry)
                .tracePropagation(new MicrometerTracePropagation(tracer, propagator));
        // end::without-spring[]
        return engines.start(options, definitions);
    }

    // tag::webflux[]
    // A WebFlux handler: the server's observation is in the Reactor context,
    // so the job's runs join the request's trace.
    Mono<Long> ship(String orderId) {
        return engine.insert(JobRequest.of("ship-order", orderId));
    }
    // end::webflux[]

    /** An "HTTP request": an observation (a span) the caller's Reactor context carries, as WebFlux's does. */
    private Observation request(String name) {
        return Observation.start(name, observationRegistry);
    }

    private static <T> Mono<T> under(Observation request, Mono<T> call) {
        return call.contextWrite(context -> context.put("micrometer.observation", request));
    }

    private static brave.propagation.TraceContext spanOf(Observation observation) {
        TracingObservationHandler.TracingContext tracing = observation.getContext()
                .get(TracingObservationHandler.TracingContext.class);
        return io.micrometer.tracing.brave.bridge.BraveTraceContext.toBrave(tracing.getSpan().context());
    }

    private List<MutableSpan> runs(Predicate<MutableSpan> which, int atLeast) {
        return Eventually.until(atLeast + " run spans", WAIT,
                () -> spans.stream().filter(span -> span.tags().containsKey("durable.instance.id")).filter(which)
                        .toList(),
                found -> found.size() >= atLeast);
    }

    private static Predicate<MutableSpan> ofInstance(long id) {
        return span -> Long.toString(id).equals(span.tag("durable.instance.id"));
    }

    /** Brave has no span links: the bridge keeps each as tags links[n].traceId / links[n].spanId / links[n].tags[k]. */
    private static boolean linksTo(MutableSpan span, String traceId, String spanId, String reason) {
        Map<String, String> tags = span.tags();
        for (int n = 0; n < 8; n++) {
            if (spanId.equals(tags.get("links[" + n + "].spanId")) && traceId.equals(tags.get("links[" + n + "].traceId"))
                    && reason.equals(tags.get("links[" + n + "].tags[" + DurableTracingObservationHandler.LINK_TAG + "]"))) {
                return true;
            }
        }
        return false;
    }

    @Test
    void aJobInsertedByARequestRunsAsAChildOfTheRequestSpan() {
        engine = start("traced-job", true,
                JobDefinition.of("ship-order", String.class, (String s) -> Mono.just(s)).queue("traced-job"));
        Observation request = request("http.server.requests");
        long id = under(request, ship("o-1")).block();
        request.stop();
        brave.propagation.TraceContext parent = spanOf(request);

        MutableSpan run = runs(ofInstance(id), 1).get(0);
        assertThat(run.traceId()).isEqualTo(parent.traceIdString());
        assertThat(run.parentId()).isEqualTo(parent.spanIdString());
        assertThat(run.kind()).isEqualTo(brave.Span.Kind.CONSUMER);
        engine.awaitSettled(id, WAIT).block();
        assertThat(Sql.query(db, "SELECT trace_context FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, String.class), id).get(0))
                .startsWith("00-" + parent.traceIdString() + "-" + parent.spanIdString() + "-");
    }

    @Test
    void theStepsOfAWorkflowShareTheRequestsTraceAndEachLinksToTheRunBefore() {
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("two-steps", String.class).queue("traced-flow")
                .step("first", ctx -> Mono.just(Outcome.next("second", ctx.state())))
                .step("second", ctx -> Mono.just(Outcome.next("third", ctx.state()).inline()))
                .step("third", ctx -> Mono.just(Outcome.done("ok")))
                .build();
        DurableEngine engine = start("traced-flow", true, flow);
        Observation request = request("http.server.requests");
        long id = under(request, engine.insert(JobRequest.of("two-steps", "s"))).block();
        request.stop();
        brave.propagation.TraceContext parent = spanOf(request);

        List<MutableSpan> steps = runs(ofInstance(id), 2);
        MutableSpan first = steps.stream().filter(s -> "first".equals(s.tag("durable.step"))).findFirst().orElseThrow();
        MutableSpan second = steps.stream().filter(s -> "second".equals(s.tag("durable.step"))).findFirst().orElseThrow();
        assertThat(first.traceId()).isEqualTo(parent.traceIdString());
        assertThat(second.traceId()).isEqualTo(parent.traceIdString());
        assertThat(first.parentId()).isEqualTo(parent.spanIdString());
        assertThat(second.parentId()).isEqualTo(parent.spanIdString());
        assertThat(linksTo(second, first.traceId(), first.id(), "previous_run")).as("second links to first: %s",
                second.tags()).isTrue();
        // An inline step (same claim, no pick) links to the step before it too.
        MutableSpan third = runs(ofInstance(id).and(s -> "third".equals(s.tag("durable.step"))), 1).get(0);
        assertThat(third.traceId()).isEqualTo(parent.traceIdString());
        assertThat(third.parentId()).isEqualTo(parent.spanIdString());
        assertThat(linksTo(third, second.traceId(), second.id(), "previous_run")).isTrue();
    }

    @Test
    void aRetryIsLinkedToThePreviousAttempt() {
        AtomicInteger calls = new AtomicInteger();
        DurableEngine engine = start("traced-retry", true, JobDefinition.of("flaky", String.class,
                        (String s) -> calls.incrementAndGet() == 1 ? Mono.error(new IllegalStateException("first"))
                                : Mono.just("ok"))
                .queue("traced-retry").backoff(Backoff.fixed(Duration.ofMillis(10))));
        Observation request = request("http.server.requests");
        long id = under(request, engine.insert(JobRequest.of("flaky", "x"))).block();
        request.stop();

        List<MutableSpan> attempts = runs(ofInstance(id), 2);
        MutableSpan first = attempts.stream().filter(s -> "1".equals(s.tag("durable.attempt"))).findFirst().orElseThrow();
        MutableSpan retry = attempts.stream().filter(s -> "2".equals(s.tag("durable.attempt"))).findFirst().orElseThrow();
        assertThat(retry.traceId()).isEqualTo(spanOf(request).traceIdString());
        assertThat(linksTo(retry, first.traceId(), first.id(), "previous_run")).as("retry links: %s", retry.tags())
                .isTrue();
        assertThat(first.tags().keySet()).noneMatch(key -> key.startsWith("links["));
    }

    @Test
    void childrenAndJobsInsertedByAStepRunAsChildrenOfThatStepsSpan() {
        AtomicReference<DurableEngine> self = new AtomicReference<>();
        AtomicReference<Long> followUp = new AtomicReference<>();
        WorkflowDefinition<String> parentFlow = WorkflowDefinition.builder("spawner", String.class)
                .queue("traced-children")
                .step("spawn", ctx -> self.get().insert(JobRequest.of("echo", "inserted by the step"))
                        .doOnNext(followUp::set)
                        .thenReturn(Outcome.spawnChildren(List.of(JobRequest.of("echo", "child")), "join",
                                ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done("joined")))
                .build();
        DurableEngine engine = start("traced-children", true, parentFlow,
                JobDefinition.of("echo", String.class, (String s) -> Mono.just(s)).queue("traced-children"));
        self.set(engine);
        Observation request = request("http.server.requests");
        long id = under(request, engine.insert(JobRequest.of("spawner", "p"))).block();
        request.stop();
        String traceId = spanOf(request).traceIdString();

        MutableSpan spawn = runs(ofInstance(id).and(s -> "spawn".equals(s.tag("durable.step"))), 1).get(0);
        long child = Sql.query(db, "SELECT id FROM {schema}.durable_instances_all WHERE parent_id = $1",
                row -> row.get(0, Long.class), id).get(0);
        MutableSpan childRun = runs(ofInstance(child), 1).get(0);
        assertThat(childRun.traceId()).isEqualTo(traceId);
        assertThat(childRun.parentId()).isEqualTo(spawn.id());
        MutableSpan insertedRun = runs(ofInstance(followUp.get()), 1).get(0);
        assertThat(insertedRun.traceId()).isEqualTo(traceId);
        assertThat(insertedRun.parentId()).isEqualTo(spawn.id());
        // The join runs in the request's trace, linked to the run before it (the spawning step).
        MutableSpan join = runs(ofInstance(id).and(s -> "join".equals(s.tag("durable.step"))), 1).get(0);
        assertThat(join.traceId()).isEqualTo(traceId);
        assertThat(linksTo(join, spawn.traceId(), spawn.id(), "previous_run")).isTrue();
    }

    @Test
    void aSignalSentUnderAnotherSpanIsLinkedFromTheStepThatConsumesIt() {
        WorkflowDefinition<String> waiter = WorkflowDefinition.builder("waiter", String.class).queue("traced-signal")
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("go"), "woken", ctx.state())))
                .step("woken", ctx -> Mono.just(Outcome.done("woken")))
                .build();
        DurableEngine engine = start("traced-signal", true, waiter);
        Observation request = request("http.server.requests");
        long id = under(request, engine.insert(JobRequest.of("waiter", "w"))).block();
        request.stop();
        engine.awaitSettledOrParked(id, WAIT).block();

        Observation sender = request("http.server.requests");
        under(sender, engine.signal(id, "go", null, null)).block();
        sender.stop();
        brave.propagation.TraceContext sent = spanOf(sender);
        assertThat(sent.traceIdString()).isNotEqualTo(spanOf(request).traceIdString());

        MutableSpan woken = runs(ofInstance(id).and(s -> "woken".equals(s.tag("durable.step"))), 1).get(0);
        assertThat(woken.traceId()).isEqualTo(spanOf(request).traceIdString());
        assertThat(linksTo(woken, sent.traceIdString(), sent.spanIdString(), "signal")).as("links: %s", woken.tags())
                .isTrue();
    }

    @Test
    void aSignalCarriesItsSendersContextUntilConsumed() {
        WorkflowDefinition<String> waiter = WorkflowDefinition.builder("holder", String.class).queue("held-signal")
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("never"), "end", ctx.state())))
                .step("end", ctx -> Mono.just(Outcome.done("end")))
                .build();
        DurableEngine engine = start("held-signal", true, waiter);
        long id = engine.insert(JobRequest.of("holder", "w")).block();
        engine.awaitSettledOrParked(id, WAIT).block();
        Observation sender = request("http.server.requests");
        under(sender, engine.signal(id, "other", null, null)).block();
        sender.stop();
        assertThat(Sql.query(db, "SELECT trace_context FROM {schema}.durable_signals WHERE instance_id = $1",
                row -> row.get(0, String.class), id))
                .containsExactly("00-" + spanOf(sender).traceIdString() + "-" + spanOf(sender).spanIdString() + "-01");
        // Without a span around the sender, the signal carries nothing.
        engine.signal(id, "another", null, null).block();
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals WHERE instance_id = $1"
                + " AND trace_context IS NULL", row -> row.get(0, Long.class), id)).containsExactly(1L);
    }

    @Test
    void aFollowUpCarriesTheContextOfTheRequestThatMadeIt() {
        reactor.core.publisher.Sinks.One<String> release = reactor.core.publisher.Sinks.one();
        AtomicInteger calls = new AtomicInteger();
        DurableEngine engine = start("traced-follow-up", true, JobDefinition.of("keyed", String.class,
                (String s) -> calls.incrementAndGet() == 1 ? release.asMono() : Mono.just(s)).queue("traced-follow-up"));
        Observation first = request("http.server.requests");
        long holder = under(first, engine.insert(JobRequest.of("keyed", "first").correlationKey("k"))).block();
        first.stop();
        Eventually.until("the holder runs", WAIT, () -> calls.get() == 1);

        Observation second = request("http.server.requests");
        dev.durable.InsertResult followUp = under(second, engine.insertWithResult(JobRequest.of("keyed", "second")
                .correlationKey("k").onConflict(dev.durable.ConflictPolicy.replace()))).block();
        second.stop();
        assertThat(followUp.disposition()).isEqualTo(dev.durable.InsertResult.Disposition.FOLLOW_UP);
        release.tryEmitValue("done");
        engine.awaitSettled(holder, WAIT).block();

        // The settle trigger inserted it with the second request's context: its run is that request's child.
        brave.propagation.TraceContext made = spanOf(second);
        MutableSpan run = runs(ofInstance(followUp.id()), 1).get(0);
        assertThat(run.traceId()).isEqualTo(made.traceIdString());
        assertThat(run.parentId()).isEqualTo(made.spanIdString());
    }

    @Test
    void aB3OnlyPropagatorStillFollowsTheInstance() {
        ThreadLocalCurrentTraceContext current = ThreadLocalCurrentTraceContext.newBuilder().build();
        try (Tracing b3 = Tracing.newBuilder().currentTraceContext(current).traceId128Bit(true).supportsJoin(false)
                .sampler(Sampler.ALWAYS_SAMPLE)
                .addSpanHandler(new SpanHandler() {
                    @Override
                    public boolean end(brave.propagation.TraceContext context, MutableSpan span, Cause cause) {
                        spans.add(span);
                        return true;
                    }
                })
                .build()) {
            BraveTracer b3Tracer = new BraveTracer(b3.tracer(), new BraveCurrentTraceContext(current));
            BravePropagator b3Propagator = new BravePropagator(b3);
            ObservationRegistry registry = ObservationRegistry.create();
            registry.observationConfig().observationHandler(new FirstMatchingCompositeObservationHandler(
                    new DurableTracingObservationHandler(b3Tracer, b3Propagator),
                    new DefaultTracingObservationHandler(b3Tracer)));
            DurableEngine b3Engine = engines.start(engines.options("b3").observationRegistry(registry)
                            .tracePropagation(new MicrometerTracePropagation(b3Tracer, b3Propagator))
                            .queue(QueueOptions.builder("b3").pollInterval(Duration.ofMillis(100)).build()),
                    JobDefinition.of("b3-echo", String.class, (String s) -> Mono.just(s)).queue("b3"));
            Observation request = Observation.start("http.server.requests", registry);
            long id = under(request, b3Engine.insert(JobRequest.of("b3-echo", "x"))).block();
            request.stop();
            brave.propagation.TraceContext parent = spanOf(request);

            // Stored as a traceparent made of the span's ids; read back through B3 headers.
            assertThat(Sql.query(db, "SELECT trace_context FROM {schema}.durable_instances_all WHERE id = $1",
                    row -> row.get(0, String.class), id))
                    .containsExactly("00-" + parent.traceIdString() + "-" + parent.spanIdString() + "-01");
            MutableSpan run = runs(ofInstance(id), 1).get(0);
            assertThat(run.traceId()).isEqualTo(parent.traceIdString());
            assertThat(run.parentId()).isEqualTo(parent.spanIdString());
        }
    }

    @Test
    void withoutTracingNothingIsStored() {
        WorkflowDefinition<String> waiter = WorkflowDefinition.builder("untraced", String.class).queue("untraced")
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("go"), "woken", ctx.state())))
                .step("woken", ctx -> Mono.just(Outcome.done("woken")))
                .build();
        // Observations on (runs still make spans), but no trace propagation configured.
        DurableEngine engine = start("untraced", false, waiter);
        Observation request = request("http.server.requests");
        long id = under(request, engine.insert(JobRequest.of("untraced", "w"))).block();
        engine.awaitSettledOrParked(id, WAIT).block();
        under(request, engine.signal(id, "go", null, null)).block();
        request.stop();
        engine.awaitSettled(id, WAIT).block();

        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances_all WHERE queue = 'untraced'"
                + " AND (trace_context IS NOT NULL OR trace_last IS NOT NULL)", row -> row.get(0, Long.class)))
                .containsExactly(0L);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances_all WHERE queue = 'untraced'",
                row -> row.get(0, Long.class))).containsExactly(1L);
    }

    @Test
    void withTracingButNoSpanAroundTheCallerNothingIsStored() {
        DurableEngine engine = start("no-span", true,
                JobDefinition.of("echo", String.class, (String s) -> Mono.just(s)).queue("no-span"));
        long id = engine.insert(JobRequest.of("echo", "x")).block();
        engine.awaitSettled(id, WAIT).block();
        assertThat(Sql.query(db, "SELECT trace_context IS NULL FROM {schema}.durable_instances_all WHERE id = $1",
                row -> row.get(0, Boolean.class), id)).containsExactly(true);
        // Its run's span started a trace of its own, and was kept as the instance's last run.
        assertThat(Sql.query(db, "SELECT trace_last IS NOT NULL FROM {schema}.durable_instances_all WHERE id = $1",
                row -> row.get(0, Boolean.class), id)).containsExactly(true);
    }
}
