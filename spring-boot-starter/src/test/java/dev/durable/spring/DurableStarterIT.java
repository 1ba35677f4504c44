package dev.durable.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.spi.Connection;
import brave.handler.MutableSpan;
import brave.handler.SpanHandler;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.micrometer.observation.autoconfigure.ObservationAutoConfiguration;
import org.springframework.boot.micrometer.tracing.autoconfigure.MicrometerTracingAutoConfiguration;
import org.springframework.boot.micrometer.tracing.brave.autoconfigure.BraveAutoConfiguration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The auto-configured engine on a real PostgreSQL: start, run, meters, health, drain on close. */
class DurableStarterIT {

    private static TestDatabase db;

    @BeforeAll
    static void database() {
        db = TestPostgres.newDatabase("starter");
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    private ApplicationContextRunner runner() {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(DurableAutoConfiguration.class))
                .withPropertyValues("durable.url=" + db.url(), "durable.schema=" + db.schema(),
                        "durable.queues.default.poll-interval=100ms", "durable.queues.default.drain-timeout=10s")
                .withBean(MeterRegistry.class, SimpleMeterRegistry::new)
                .withBean("greet", JobDefinition.class, () -> JobDefinition.of("greet", String.class,
                        (String name) -> Mono.just("hello " + name)))
                .withBean("slow", JobDefinition.class, () -> JobDefinition.of("slow", String.class,
                        (String name) -> Mono.delay(Duration.ofMillis(1500)).thenReturn("slept")));
    }

    /**
     * Boot's own Brave tracing (W3C propagation by default) with the starter: the engine follows trace
     * context without any Durable-specific configuration, and Boot's grouping of tracing handlers puts
     * Durable's handler first, so a retry's span carries its link.
     */
    @Test
    void withBootsTracingARunIsAChildOfTheSpanThatInsertedIt() {
        List<MutableSpan> spans = new CopyOnWriteArrayList<>();
        AtomicInteger calls = new AtomicInteger();
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(ObservationAutoConfiguration.class,
                        MicrometerTracingAutoConfiguration.class, BraveAutoConfiguration.class, DurableTracing.class,
                        DurableAutoConfiguration.class))
                .withPropertyValues("durable.url=" + db.url(), "durable.schema=" + db.schema(),
                        "durable.queues.traced.poll-interval=100ms", "management.tracing.sampling.probability=1.0")
                .withBean(SpanHandler.class, () -> new SpanHandler() {
                    @Override
                    public boolean end(brave.propagation.TraceContext context, MutableSpan span, Cause cause) {
                        spans.add(span);
                        return true;
                    }
                })
                .withBean("tracedGreet", JobDefinition.class, () -> JobDefinition.of("traced-greet", String.class,
                        (String name) -> calls.incrementAndGet() == 1 ? Mono.error(new IllegalStateException("once"))
                                : Mono.just("hello " + name))
                        .queue("traced").backoff(dev.durable.Backoff.fixed(Duration.ofMillis(10))))
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    DurableEngine engine = context.getBean(DurableEngine.class);
                    Observation request = Observation.start("http.server.requests",
                            context.getBean(ObservationRegistry.class));
                    long id = engine.insert(JobRequest.of("traced-greet", "ada"))
                            .contextWrite(reactor -> reactor.put("micrometer.observation", request))
                            .block(Duration.ofSeconds(10));
                    request.stop();
                    io.micrometer.tracing.handler.TracingObservationHandler.TracingContext tracing = request
                            .getContext().get(io.micrometer.tracing.handler.TracingObservationHandler.TracingContext.class);
                    io.micrometer.tracing.TraceContext parent = tracing.getSpan().context();
                    assertThat(engine.awaitSettled(id, Duration.ofSeconds(20)).block().status())
                            .isEqualTo(InstanceStatus.DONE);
                    // A run's span ends as its outcome commits, which may be just after the settle is seen.
                    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
                    List<MutableSpan> runs = List.of();
                    while (runs.size() < 2 && System.nanoTime() < deadline) {
                        Thread.sleep(20);
                        runs = spans.stream().filter(span -> Long.toString(id).equals(span.tag("durable.instance.id")))
                                .toList();
                    }
                    assertThat(runs).hasSize(2);
                    assertThat(runs).allSatisfy(run -> {
                        assertThat(run.traceId()).isEqualTo(parent.traceId());
                        assertThat(run.parentId()).isEqualTo(parent.spanId());
                    });
                    MutableSpan retry = runs.stream().filter(run -> "2".equals(run.tag("durable.attempt")))
                            .findFirst().orElseThrow();
                    assertThat(retry.tags()).containsEntry("links[0].tags[durable.link]", "previous_run");
                });
    }

    @Test
    void startsWithTheContextRunsJobsAndReportsHealthAndMeters() {
        runner().run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(DurableLifecycle.class).isRunning()).isTrue();
            DurableEngine engine = context.getBean(DurableEngine.class);

            long id = engine.insert(JobRequest.of("greet", "ada")).block(Duration.ofSeconds(10));
            Instance done = engine.awaitSettled(id, Duration.ofSeconds(20)).block();
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(done.resultJson()).isEqualTo("\"hello ada\"");

            MeterRegistry meters = context.getBean(MeterRegistry.class);
            assertThat(meters.find("durable.inserted").tag("type", "greet").counter().count()).isEqualTo(1.0);
            assertThat(meters.find("durable.outcomes").tag("type", "greet").counter()).isNotNull();

            Health health = context.getBean(DurableHealthIndicator.class).health().block(Duration.ofSeconds(10));
            assertThat(health.getStatus()).isEqualTo(Status.UP);
            assertThat(health.getDetails()).containsEntry("schema", db.schema()).containsEntry("engine", "running")
                    .containsKey("liveEngines");
            // Work no live engine runs shows in the details (the engine stays up: it is the fleet's state).
            engine.insert(JobRequest.of("greet", "orphan").queue("nobody-runs-this")).block(Duration.ofSeconds(10));
            Health withOrphan = context.getBean(DurableHealthIndicator.class).health().block(Duration.ofSeconds(10));
            assertThat(withOrphan.getStatus()).isEqualTo(Status.UP);
            assertThat(withOrphan.getDetails().get("unservedWork").toString())
                    .contains("nobody-runs-this").contains("NO_ENGINE_SERVES_QUEUE");
        });
    }

    @Test
    void closingTheContextDrainsRunningJobs() {
        long[] id = new long[1];
        runner().run(context -> {
            DurableEngine engine = context.getBean(DurableEngine.class);
            // Subscribe before inserting, so the STARTED event cannot be missed.
            Mono<JobEvent> started = engine.events()
                    .filter(event -> event.kind() == JobEvent.Kind.STARTED && "slow".equals(event.type()))
                    .next().cache();
            started.subscribe(event -> { }, error -> { });
            id[0] = engine.insert(JobRequest.of("slow", "zzz")).block(Duration.ofSeconds(10));
            assertThat(started.block(Duration.ofSeconds(20)).id()).isEqualTo(id[0]);
        });
        // The context has closed: the lifecycle waited for the running job instead of abandoning it.
        assertThat(status(id[0])).isEqualTo("done");
    }

    private static String status(long id) {
        return Flux.usingWhen(db.connectionFactory().create(),
                        (Connection connection) -> Flux.from(connection.createStatement(
                                        "SELECT status FROM \"" + db.schema() + "\".durable_instances_all WHERE id = $1")
                                .bind("$1", id).execute())
                                .flatMap(result -> result.map((row, meta) -> row.get(0, String.class))),
                        Connection::close)
                .single()
                .block(Duration.ofSeconds(10));
    }
}
