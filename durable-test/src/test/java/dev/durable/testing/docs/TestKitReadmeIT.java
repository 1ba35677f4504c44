package dev.durable.testing.docs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.JobDefinition;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import dev.durable.testing.DrainOptions;
import dev.durable.testing.DrainSummary;
import dev.durable.testing.DurableTesting;
import dev.durable.testing.Performed;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.RecordedEvents;
import dev.durable.testing.TestClock;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/** The blocks of docs/testing.md, "Testing your own jobs" (issue 23), compiled and run here. */
@ExtendWith(PostgresExtension.class)
class TestKitReadmeIT {

    record Invoice(String number, int cents) {
    }

    record Approval(String by) {
    }

    static final AtomicInteger CHARGES = new AtomicInteger();

    // The charge fails twice (the card network is down), then goes through: exponential backoff from 1 minute.
    static final JobDefinition<Invoice, String> CHARGE = JobDefinition.of("charge", Invoice.class, (Invoice invoice) ->
                    CHARGES.incrementAndGet() <= 2 ? Mono.<String>error(new IllegalStateException("network down"))
                            : Mono.just("charged " + invoice.cents()))
            .queue("billing").backoff(Backoff.exponential(Duration.ofMinutes(1), Duration.ofHours(1)));

    // tag::workflow[]
    static final WorkflowDefinition<Invoice> APPROVAL = WorkflowDefinition.builder("approval", Invoice.class)
            .queue("billing")
            .step("ask", ctx -> Mono.just(Outcome.await(Set.of("approved"), "decide", ctx.state(), Duration.ofHours(1))))
            .step("decide", ctx -> Mono.just(ctx.awaitTimedOut()
                    ? Outcome.<Invoice>done("expired")
                    : Outcome.<Invoice>next("charge", ctx.state())))
            .step("charge", ctx -> Mono.just(Outcome.done("approved " + ctx.state().number())))
            .build();
    // end::workflow[]

    private TestDatabase db;
    private DurableEngine engine;
    private TestClock clock;

    @BeforeEach
    void start(TestDatabase database) {
        db = database;
        CHARGES.set(0);
        // tag::clock[]
        clock = TestClock.on(db);
        engine = DurableEngine.builder(clock.engineOptions()
                        .queue(QueueOptions.builder("billing").pollInterval(Duration.ofMillis(50)).build()).build())
                .register(CHARGE).register(APPROVAL).build();
        engine.start().block();
        // end::clock[]
    }

    @AfterEach
    void stop() {
        engine.closeLater().block(Duration.ofSeconds(60));
    }

    @Test
    void retriesThroughTheirBackoffWithoutWaiting() {
        // tag::drain[]
        long id = engine.insert(JobRequest.of("charge", new Invoice("F-17", 4200)).runIn(Duration.ofMinutes(5))).block();

        DrainSummary ran = DurableTesting.drain(engine, DrainOptions.defaults().withScheduled().withRecursion());

        DurableTesting.assertInstance(engine, id).isDone().hasResult("charged 4200");
        assertThat(ran.retried()).isEqualTo(2);   // at 5 min, then after 1 and 2 min of backoff
        assertThat(ran.done()).isEqualTo(1);
        // end::drain[]
    }

    @Test
    void anHourLongAwaitTimesOutWhenTheClockPassesIt() {
        // tag::await[]
        try (RecordedEvents events = DurableTesting.record(engine)) {
            long id = engine.insert(JobRequest.of("approval", new Invoice("F-18", 990))).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
            DurableTesting.assertInstance(engine, id).isAwaitingSignal();

            clock.advance(Duration.ofHours(1).plusSeconds(1));
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());

            DurableTesting.assertInstance(engine, id).isDone().hasResult("expired");
            events.assertPath(id, "ask", "decide").assertEvent(id, JobEvent.Kind.WOKEN);
        }
        // end::await[]
    }

    @Test
    void signalledItCharges() {
        // tag::assertions[]
        try (RecordedEvents events = DurableTesting.record(engine)) {
            long id = engine.insert(JobRequest.of("approval", new Invoice("F-19", 1500))).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
            engine.signal(id, "approved", new Approval("ada"), null).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());

            DurableTesting.assertInstance(engine, id).isDone().hasConsumedSignals("approved").hasChildren(0);
            events.assertPath(id, "ask", "decide", "charge").refuteEvent(id, JobEvent.Kind.RETRIED);
            DurableTesting.assertInserted(engine, "approval", Invoice.class, invoice -> invoice.cents() == 1500);
            DurableTesting.refuteInserted(engine, "charge");
        }
        // end::assertions[]
    }

    @Test
    void handlersAndStepsRunInline() {
        // tag::perform[]
        Performed<String> first = DurableTesting.perform(CHARGE, new Invoice("F-20", 700));
        assertThat(first.kind()).isEqualTo(Performed.Kind.RETRY);
        assertThat(first.retryAfter()).isEqualTo(Duration.ofMinutes(1));

        Performed<Object> decided = DurableTesting.step(APPROVAL, "decide").state(new Invoice("F-20", 700))
                .signal("approved", new Approval("ada")).perform();
        assertThat(decided.kind()).isEqualTo(Performed.Kind.NEXT);
        assertThat(decided.outcome().step()).isEqualTo("charge");
        // end::perform[]
    }

    @Test
    void stateAndResultAsValuesAndTrees() {
        long id = engine.insert(JobRequest.of("approval", new Invoice("F-21", 250))).block();
        DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
        // tag::typed[]
        Instance instance = engine.get(id).block();
        Invoice invoice = instance.state(Invoice.class);   // decoded by the engine's codec
        JsonNode body = instance.stateTree();              // JSON as JSON: a WebFlux handler returns it as is
        // end::typed[]
        assertThat(invoice).isEqualTo(new Invoice("F-21", 250));
        assertThat(body.get("cents").asInt()).isEqualTo(250);
    }
}
