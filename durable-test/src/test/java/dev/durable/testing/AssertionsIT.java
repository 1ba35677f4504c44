package dev.durable.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/** Issue 23: assertions on what was inserted, on a workflow's path, its signals, its children and its events. */
@ExtendWith(PostgresExtension.class)
class AssertionsIT {

    record Email(String to, String subject) {
    }

    private DurableEngine engine;
    /** The engine, for the mail step to insert through (set once it is built). */
    private DurableEngine engineRef;

    @BeforeEach
    void start(TestDatabase db) {
        JobDefinition<Email, String> send = JobDefinition.of("send-email", Email.class,
                (Email email) -> Mono.just("sent to " + email.to())).queue("test");
        JobDefinition<Integer, Integer> square = JobDefinition.of("square", Integer.class, (Integer n) -> Mono.just(n * n))
                .queue("test");
        // Signs up, fans out two squares, waits for a confirmation, then mails.
        WorkflowDefinition<Integer> signup = WorkflowDefinition.builder("signup", Integer.class).queue("test")
                .step("fan", ctx -> Mono.just(Outcome.spawnChildren(
                        List.of(JobRequest.of("square", ctx.state()), JobRequest.of("square", ctx.state() + 1)),
                        "confirm", ctx.state())))
                .step("confirm", ctx -> Mono.just(Outcome.await(Set.of("confirmed"), "mail", ctx.state())))
                .step("mail", ctx -> engineRef.insert(JobRequest.of("send-email",
                                new Email("user" + ctx.state() + "@example.com", "welcome")))
                        .thenReturn(Outcome.done("mailed")))
                .build();
        engine = DurableEngine.builder(db.engineOptions().name("asserts")
                        .queue(QueueOptions.builder("test").pollInterval(Duration.ofMillis(50)).build()).build())
                .register(send).register(square).register(signup).build();
        engineRef = engine;
        engine.start().block();
    }

    @AfterEach
    void stop() {
        engine.closeLater().block(Duration.ofSeconds(60));
    }

    @Test
    void aWorkflowsPathSignalsChildrenAndWhatItInsertedAreAsserted() {
        try (RecordedEvents events = DurableTesting.record(engine)) {
            long id = engine.insert(JobRequest.of("signup", 3)).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
            DurableTesting.assertInstance(engine, id).isAwaitingSignal().hasChildren(2)
                    .hasAllChildren(InstanceStatus.DONE);
            DurableTesting.refuteInserted(engine, "send-email");

            engine.signal(id, "confirmed", "yes", null).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());

            DurableTesting.assertInstance(engine, id).isDone().hasResult("mailed").hasConsumedSignals("confirmed")
                    .hasState(3);
            events.assertPath(id, "fan", "confirm", "mail")
                    .assertEvent(id, JobEvent.Kind.PARKED)
                    .assertEvent(id, JobEvent.Kind.WOKEN)
                    .refuteEvent(id, JobEvent.Kind.RETRIED);
            assertThat(events.count(id, JobEvent.Kind.PARKED)).isEqualTo(2);
            assertThat(DurableTesting.children(engine, id)).extracting(child -> child.result(Integer.class))
                    .containsExactlyInAnyOrder(9, 16);

            DurableTesting.assertInserted(engine, "send-email");
            assertThat(DurableTesting.assertInserted(engine, "send-email", Email.class,
                    email -> email.to().equals("user3@example.com"))).hasSize(1);
            DurableTesting.refuteInserted(engine, "send-email", Email.class, email -> email.to().startsWith("admin"));

            assertThatThrownBy(() -> DurableTesting.assertInserted(engine, "send-email", Email.class,
                    email -> email.subject().equals("goodbye")))
                    .isInstanceOf(AssertionError.class).hasMessageContaining("user3@example.com");
            assertThatThrownBy(() -> DurableTesting.refuteInserted(engine, "square"))
                    .isInstanceOf(AssertionError.class).hasMessageContaining("2 instance(s) of square");
            assertThatThrownBy(() -> DurableTesting.assertInserted(engine, "refund"))
                    .isInstanceOf(AssertionError.class).hasMessageContaining("send-email");
            assertThatThrownBy(() -> events.assertPath(id, "fan", "mail"))
                    .isInstanceOf(AssertionError.class).hasMessageContaining("[fan, confirm, mail]");
            assertThatThrownBy(() -> DurableTesting.assertInstance(engine, id).hasConsumedSignals())
                    .isInstanceOf(AssertionError.class).hasMessageContaining("[confirmed]");
            assertThatThrownBy(() -> DurableTesting.assertInstance(engine, id).hasChildren(3))
                    .isInstanceOf(AssertionError.class).hasMessageContaining("has 2 children");
        }
    }
}
