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
import java.time.Duration;
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
