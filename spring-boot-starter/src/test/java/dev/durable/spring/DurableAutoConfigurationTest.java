package dev.durable.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.RecurringJob;
import dev.durable.WorkflowDefinition;
import dev.durable.Outcome;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import dev.durable.observation.DurableTracingObservationHandler;
import dev.durable.observation.MicrometerTracePropagation;
import dev.durable.observation.TracePropagation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.brave.bridge.BraveCurrentTraceContext;
import io.micrometer.tracing.brave.bridge.BravePropagator;
import io.micrometer.tracing.brave.bridge.BraveTracer;
import io.micrometer.tracing.propagation.Propagator;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.core.publisher.Mono;

/**
 * The auto-configuration without a database: every context here has {@code durable.auto-startup}
 * off, so the engine is built and wired but never started.
 */
class DurableAutoConfigurationTest {

    private static final String NOWHERE = "r2dbc:postgresql://app:secret@localhost:1/app";

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(DurableTracing.class, DurableAutoConfiguration.class))
            .withPropertyValues("durable.auto-startup=false");

    @Test
    void propertiesBecomeEngineOptions() {
        runner.withPropertyValues("durable.url=" + NOWHERE, "durable.schema=jobs", "durable.name=node-a",
                        "durable.lease-ttl=45s", "durable.heartbeat-interval=3s", "durable.reaper.interval=7s",
                        "durable.run-maintenance=false", "durable.pool-max-size=4",
                        "durable.poke-transport=postgres-notify",
                        "durable.queues.mail.concurrency=20", "durable.queues.mail.prefetch=5",
                        "durable.queues.mail.min-demand=4", "durable.queues.mail.poll-interval=250ms",
                        "durable.queues.mail.max-poll-interval=2s", "durable.queues.mail.drain-timeout=9s")
                .run(context -> {
                    assertThat(context).hasNotFailed().hasSingleBean(DurableEngine.class)
                            .hasSingleBean(DurableLifecycle.class);
                    EngineOptions options = context.getBean(DurableEngine.class).options();
                    assertThat(options.url()).isEqualTo(NOWHERE);
                    assertThat(options.schema()).isEqualTo("jobs");
                    assertThat(options.name()).isEqualTo("node-a");
                    assertThat(options.leaseTtl()).isEqualTo(Duration.ofSeconds(45));
                    assertThat(options.heartbeatInterval()).isEqualTo(Duration.ofSeconds(3));
                    assertThat(options.reaper().interval()).isEqualTo(Duration.ofSeconds(7));
                    assertThat(options.runMaintenance()).isFalse();
                    assertThat(options.poolMaxSize()).isEqualTo(4);
                    assertThat(options.pokeTransport().toString()).containsIgnoringCase("notify");
                    QueueOptions mail = options.queues().get("mail");
                    assertThat(mail.concurrency()).isEqualTo(20);
                    assertThat(mail.prefetch()).isEqualTo(5);
                    assertThat(mail.minDemand()).isEqualTo(4);
                    assertThat(mail.pollInterval()).isEqualTo(Duration.ofMillis(250));
                    assertThat(mail.maxPollInterval()).isEqualTo(Duration.ofSeconds(2));
                    assertThat(mail.drainTimeout()).isEqualTo(Duration.ofSeconds(9));
                    assertThat(options.queues()).containsOnlyKeys("mail");
                    assertThat(context.getBean(DurableLifecycle.class).isRunning()).isFalse();
                });
    }

    @Test
    void withoutQueuesOrDefinitionsRunsTheDefaultQueue() {
        runner.withPropertyValues("durable.url=" + NOWHERE).run(context ->
                assertThat(context.getBean(DurableEngine.class).options().queues()).containsOnlyKeys("default"));
    }

    @Test
    void registersDefinitionAndRecurringBeansAndRunsTheirQueues() {
        runner.withPropertyValues("durable.url=" + NOWHERE, "durable.queues.mail.concurrency=3")
                .withBean("greet", JobDefinition.class, () -> JobDefinition.of("greet", String.class,
                        (String name) -> Mono.just("hello " + name)).queue("mail"))
                .withBean("flow", WorkflowDefinition.class, () -> WorkflowDefinition.builder("flow", String.class)
                        .queue("flows").step("only", ctx -> Mono.just(Outcome.done("ok"))).build())
                .withBean("nightly", RecurringJob.class, () -> RecurringJob.of("nightly", "0 3 * * *",
                        JobRequest.of("greet", "night").queue("cron")))
                .run(context -> {
                    DurableEngine engine = context.getBean(DurableEngine.class);
                    assertThat(engine.options().queues()).containsOnlyKeys("mail", "flows", "cron");
                    assertThat(engine.options().queues().get("mail").concurrency()).isEqualTo(3);
                    assertThat(engine.options().queues().get("flows").concurrency())
                            .isEqualTo(QueueOptions.DEFAULT_CONCURRENCY);
                });
    }

    @Test
    void theUrlsPasswordReachesNoToStringAndNoStartupError() {
        String url = "r2dbc:postgresql://app:pA55@w/Or:D@localhost:1/app?sslPassword=sslPA55";
        runner.withPropertyValues("durable.url=" + url, "durable.queues.mail.concurrency=2")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    String properties = context.getBean(DurableProperties.class).toString();
                    assertThat(properties).doesNotContain("pA55").doesNotContain("w/Or:D")
                            .contains("url=r2dbc:postgresql://app:****@localhost:1/app?sslPassword=****");
                    for (java.lang.reflect.RecordComponent component : DurableProperties.class.getRecordComponents()) {
                        assertThat(properties).as("toString names every property").contains(component.getName() + "=");
                    }
                    assertThat(context.getBean(DurableEngine.class).options().toString()).doesNotContain("pA55")
                            .doesNotContain("w/Or:D").contains("concurrency=2");
                });
        runner.withPropertyValues("durable.url=" + url.substring("r2dbc:".length()))
                .run(context -> {
                    assertThat(context).hasFailed();
                    for (Throwable error = context.getStartupFailure(); error != null; error = error.getCause()) {
                        assertThat(error.toString()).doesNotContain("pA55").doesNotContain("w/Or:D");
                    }
                });
    }

    @Test
    void derivesTheUrlFromSpringR2dbcProperties() {
        runner.withPropertyValues("spring.r2dbc.url=r2dbc:postgresql://db.example:5432/app",
                        "spring.r2dbc.username=app user", "spring.r2dbc.password=p@ss:w/rd")
                .run(context -> {
                    String url = context.getBean(DurableEngine.class).options().url();
                    assertThat(url).isEqualTo("r2dbc:postgresql://app%20user:p%40ss%3Aw%2Frd@db.example:5432/app");
                    // R2DBC's own parser gives back the credentials as they were.
                    var parsed = io.r2dbc.spi.ConnectionFactoryOptions.parse(url);
                    assertThat(parsed.getValue(io.r2dbc.spi.ConnectionFactoryOptions.USER)).isEqualTo("app user");
                    assertThat(String.valueOf(parsed.getValue(io.r2dbc.spi.ConnectionFactoryOptions.PASSWORD)))
                            .isEqualTo("p@ss:w/rd");
                });
    }

    @Test
    void credentialsAlreadyInTheUrlAreKept() {
        assertThat(DurableAutoConfiguration.withCredentials(NOWHERE, "other", "x")).isEqualTo(NOWHERE);
        assertThat(DurableAutoConfiguration.withCredentials("r2dbc:postgresql://h/db", null, null))
                .isEqualTo("r2dbc:postgresql://h/db");
        assertThat(DurableAutoConfiguration.withCredentials("r2dbc:postgresql://h/db", "u", null))
                .isEqualTo("r2dbc:postgresql://u@h/db");
    }

    @Test
    void durableUrlWinsOverSpringR2dbc() {
        runner.withPropertyValues("durable.url=" + NOWHERE, "spring.r2dbc.url=r2dbc:postgresql://other/db")
                .run(context -> assertThat(context.getBean(DurableEngine.class).options().url()).isEqualTo(NOWHERE));
    }

    @Test
    void usesTheApplicationsConnectionFactoryWithoutAUrl() {
        ConnectionFactory factory = ConnectionFactories.get(NOWHERE);
        runner.withBean(ConnectionFactory.class, () -> factory).run(context -> {
            EngineOptions options = context.getBean(DurableEngine.class).options();
            assertThat(options.connectionFactory()).isSameAs(factory);
            assertThat(options.url()).isNull();
        });
    }

    @Test
    void withoutAnyDatabaseTheContextFailsSayingWhatToSet() {
        runner.run(context -> assertThat(context).hasFailed().getFailure()
                .rootCause().hasMessageContaining("durable.url").hasMessageContaining("spring.r2dbc.url"));
    }

    @Test
    void invalidValuesFailNamingTheOption() {
        runner.withPropertyValues("durable.url=" + NOWHERE, "durable.queues.mail.concurrency=0")
                .run(context -> assertThat(context).hasFailed().getFailure().rootCause()
                        .hasMessageContaining("concurrency"));
        runner.withPropertyValues("durable.url=postgresql://localhost/app")
                .run(context -> assertThat(context).hasFailed().getFailure().rootCause()
                        .hasMessageContaining("R2DBC URL"));
    }

    @Test
    void wiresTheApplicationsMeterAndObservationRegistries() {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        ObservationRegistry observations = ObservationRegistry.create();
        runner.withPropertyValues("durable.url=" + NOWHERE)
                .withBean(MeterRegistry.class, () -> meters)
                .withBean(ObservationRegistry.class, () -> observations)
                .run(context -> {
                    EngineOptions options = context.getBean(DurableEngine.class).options();
                    assertThat(options.meterRegistry()).isSameAs(meters);
                    assertThat(options.observationRegistry()).isSameAs(observations);
                });
    }

    /** A tracing bridge as Boot makes one (Brave here): a Tracer and a Propagator bean. */
    private static ApplicationContextRunner withTracer(ApplicationContextRunner runner, brave.Tracing tracing) {
        return runner.withBean(Tracer.class, () -> new BraveTracer(tracing.tracer(),
                        new BraveCurrentTraceContext(tracing.currentTraceContext())))
                .withBean(Propagator.class, () -> new BravePropagator(tracing));
    }

    @Test
    void withATracingBridgeTheEngineFollowsTraceContext() {
        try (brave.Tracing tracing = brave.Tracing.newBuilder().build()) {
            withTracer(runner.withPropertyValues("durable.url=" + NOWHERE), tracing).run(context -> {
                assertThat(context).hasNotFailed().hasSingleBean(DurableTracingObservationHandler.class);
                assertThat(context.getBean(DurableEngine.class).options().tracePropagation())
                        .isInstanceOf(MicrometerTracePropagation.class)
                        .isSameAs(context.getBean(TracePropagation.class));
            });
            withTracer(runner.withPropertyValues("durable.url=" + NOWHERE, "durable.tracing.enabled=false"), tracing)
                    .run(context -> {
                        assertThat(context).doesNotHaveBean(DurableTracingObservationHandler.class);
                        assertThat(context.getBean(DurableEngine.class).options().tracePropagation())
                                .isSameAs(TracePropagation.NONE);
                    });
        }
    }

    @Test
    void withoutATracingBridgeNothingIsTraced() {
        runner.withPropertyValues("durable.url=" + NOWHERE).run(context -> {
            assertThat(context).hasNotFailed().doesNotHaveBean(DurableTracingObservationHandler.class);
            assertThat(context.getBean(DurableEngine.class).options().tracePropagation())
                    .isSameAs(TracePropagation.NONE);
        });
        runner.withPropertyValues("durable.url=" + NOWHERE)
                .withClassLoader(new FilteredClassLoader("io.micrometer.tracing"))
                .run(context -> assertThat(context.getBean(DurableEngine.class).options().tracePropagation())
                        .isSameAs(TracePropagation.NONE));
    }

    @Test
    void customizersAdjustTheOptions() {
        runner.withPropertyValues("durable.url=" + NOWHERE)
                .withBean(DurableEngineCustomizer.class, () -> options -> options.eventBufferSize(7))
                .run(context -> assertThat(context.getBean(DurableEngine.class).options().eventBufferSize())
                        .isEqualTo(7));
    }

    @Test
    void anEngineBeanOfTheApplicationReplacesTheAutoConfiguredOne() {
        DurableEngine own = DurableEngine.builder(EngineOptions.builder().url(NOWHERE).queue("own").build()).build();
        runner.withBean(DurableEngine.class, () -> own)
                .run(context -> assertThat(context.getBean(DurableEngine.class)).isSameAs(own));
    }

    @Test
    void healthIsDownWhileTheEngineIsNotRunning() {
        runner.withPropertyValues("durable.url=" + NOWHERE).run(context -> {
            Health health = context.getBean(DurableHealthIndicator.class).health().block(Duration.ofSeconds(5));
            assertThat(health.getStatus()).isEqualTo(Status.DOWN);
            assertThat(health.getDetails()).containsEntry("engine", "not running").containsKey("queues");
        });
    }

    @Test
    void noHealthIndicatorWithoutBootsHealthSupport() {
        runner.withPropertyValues("durable.url=" + NOWHERE)
                .withClassLoader(new FilteredClassLoader("org.springframework.boot.health"))
                .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(DurableHealthIndicator.class));
    }

    @Test
    void healthIndicatorCanBeTurnedOff() {
        runner.withPropertyValues("durable.url=" + NOWHERE, "management.health.durable.enabled=false")
                .run(context -> assertThat(context).doesNotHaveBean(DurableHealthIndicator.class));
    }
}
