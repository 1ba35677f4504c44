package dev.durable.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.PermanentFailureException;
import dev.durable.QueueOptions;
import dev.durable.StepHandler;
import dev.durable.WorkflowDefinition;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Issue 23: one handler or step run inline, its outcome as a value; the engine agrees on the database. */
@ExtendWith(PostgresExtension.class)
class PerformIT {

    record Order(String sku, int quantity) {
    }

    record Approval(String by) {
    }

    static final JobDefinition<Order, Integer> PRICE = JobDefinition.of("price", Order.class, (Order order) -> {
        if (order.quantity() < 0) {
            return Mono.error(new PermanentFailureException("negative quantity"));
        }
        if (order.sku().equals("flaky")) {
            return Mono.error(new IllegalStateException("price service down"));
        }
        return Mono.just(order.quantity() * 250);
    }).queue("test").maxAttempts(3).backoff(Backoff.exponential(Duration.ofMinutes(1), Duration.ofHours(1)));

    static final WorkflowDefinition<String> APPROVAL = WorkflowDefinition.builder("approval", String.class).queue("test")
            .step("ask", ctx -> Mono.just(Outcome.await(Set.of("approved"), "decide", ctx.state(), Duration.ofHours(1))))
            .step("decide", ctx -> Mono.just(ctx.awaitTimedOut() ? Outcome.<String>fail("nobody approved " + ctx.state())
                    : Outcome.done(ctx.payload(ctx.signal("approved"), Approval.class).by() + " approved " + ctx.state())))
            .build();

    @Test
    void aJobsRunComesBackAsTheOutcomeTheEngineWouldCommit() {
        Performed<Integer> done = DurableTesting.perform(PRICE, new Order("apple", 4));
        assertThat(done.kind()).isEqualTo(Performed.Kind.DONE);
        assertThat(done.result()).isEqualTo(1000);
        assertThat(done.resultJson()).isEqualTo("1000");

        Performed<Integer> retry = DurableTesting.perform(PRICE, new Order("flaky", 1));
        assertThat(retry.kind()).isEqualTo(Performed.Kind.RETRY);
        assertThat(retry.retryAfter()).isEqualTo(Duration.ofMinutes(1));
        assertThat(retry.error()).contains("price service down");
        assertThat(retry.thrown()).isInstanceOf(IllegalStateException.class);

        assertThat(DurableTesting.perform(PRICE, new Order("flaky", 1), 2, new dev.durable.JacksonJsonCodec())
                .retryAfter()).isEqualTo(Duration.ofMinutes(2));
        assertThat(DurableTesting.perform(PRICE, new Order("flaky", 1), 3, new dev.durable.JacksonJsonCodec()).kind())
                .isEqualTo(Performed.Kind.FAILED);
        DurableTesting.perform(PRICE, new Order("apple", -1)).expect(Performed.Kind.FAILED);
        assertThatThrownBy(() -> DurableTesting.perform(PRICE, new Order("flaky", 1)).expect(Performed.Kind.DONE))
                .isInstanceOf(AssertionError.class).hasMessageContaining("price service down");
    }

    @Test
    void aStepRunsWithTheStateSignalsAndChildrenGiven() {
        Performed<Object> asked = DurableTesting.perform(APPROVAL, "ask", "invoice 7").expect(Performed.Kind.AWAIT);
        assertThat(asked.outcome().signals()).containsExactly("approved");
        assertThat(asked.outcome().step()).isEqualTo("decide");
        assertThat(asked.outcome().timeout()).isEqualTo(Duration.ofHours(1));

        Performed<Object> approved = DurableTesting.step(APPROVAL, "decide").state("invoice 7")
                .signal("approved", new Approval("ada")).perform().expect(Performed.Kind.DONE);
        assertThat(approved.result()).isEqualTo("ada approved invoice 7");

        Performed<Object> expired = DurableTesting.step(APPROVAL, "decide").state("invoice 7").awaitTimedOut().perform();
        assertThat(expired.kind()).isEqualTo(Performed.Kind.FAILED);
        assertThat(expired.error()).isEqualTo("nobody approved invoice 7");

        WorkflowDefinition<Integer> sum = WorkflowDefinition.builder("sum", Integer.class)
                .step("join", ctx -> Mono.just(Outcome.done(ctx.children().stream()
                        .mapToInt(child -> ctx.result(child, Integer.class)).sum())))
                .build();
        assertThat(DurableTesting.step(sum, "join").child("price", InstanceStatus.DONE, 5, null)
                .child("price", InstanceStatus.DONE, 7, null).perform().result()).isEqualTo(12);
        assertThatThrownBy(() -> DurableTesting.step(APPROVAL, "nope"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ask");
    }

    @Test
    void theEngineCommitsWhatPerformSaid(TestDatabase db) {
        DurableEngine engine = DurableEngine.builder(db.engineOptions().name("perform")
                        .queue(QueueOptions.builder("test").pollInterval(Duration.ofMillis(50)).build()).build())
                .register(PRICE).register(APPROVAL).build();
        engine.start().block();
        try {
            long priced = engine.insert(JobRequest.of("price", new Order("apple", 4))).block();
            long refused = engine.insert(JobRequest.of("price", new Order("apple", -1))).block();
            long approval = engine.insert(JobRequest.of("approval", "invoice 7")).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
            engine.signal(approval, "approved", new Approval("ada"), null).block();
            DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());

            DurableTesting.assertInstance(engine, priced).isDone()
                    .hasResult(DurableTesting.perform(PRICE, new Order("apple", 4)).result());
            DurableTesting.assertInstance(engine, refused).isFailed()
                    .hasLastErrorContaining(DurableTesting.perform(PRICE, new Order("apple", -1)).error());
            DurableTesting.assertInstance(engine, approval).isDone().hasResult(DurableTesting.step(APPROVAL, "decide")
                    .state("invoice 7").signal("approved", new Approval("ada")).perform().result());
            assertThat(List.of(engine.get(approval).block().result(String.class))).containsExactly("ada approved invoice 7");
        } finally {
            engine.closeLater().block(Duration.ofSeconds(60));
        }
    }

    @Test
    void aTransactionalHandlerOrStepRunsOnTheTestsOwnTransaction(TestDatabase db) {
        JobDefinition<Order, String> reserve = JobDefinition.transactional("reserve", Order.class,
                (Order order, dev.durable.JobContext context, Connection transaction) -> Flux.from(transaction
                                .createStatement("INSERT INTO reservations (sku, quantity) VALUES ($1, $2)")
                                .bind(0, order.sku()).bind(1, order.quantity()).execute())
                        .flatMap(Result::getRowsUpdated).then(Mono.just("reserved " + order.sku())));
        WorkflowDefinition<Order> fulfil = WorkflowDefinition.builder("fulfil", Order.class)
                .step("reserve", StepHandler.<Order>transactional((context, transaction) -> Flux.from(transaction
                                .createStatement("INSERT INTO reservations (sku, quantity) VALUES ($1, $2)")
                                .bind(0, context.state().sku()).bind(1, context.state().quantity()).execute())
                        .flatMap(Result::getRowsUpdated).then(Mono.just(Outcome.next("ship", context.state())))))
                .step("ship", context -> Mono.just(Outcome.done("shipped")))
                .build();
        Connection connection = Mono.from(db.connectionFactory().create()).block();
        try {
            Mono.from(connection.beginTransaction()).block();
            Flux.from(connection.createStatement("CREATE TEMP TABLE reservations (sku text, quantity int)").execute())
                    .flatMap(Result::getRowsUpdated).blockLast();

            Performed<String> done = DurableTesting.perform(reserve, new Order("tea", 2), connection);
            assertThat(done.kind()).isEqualTo(Performed.Kind.DONE);
            assertThat(done.result()).isEqualTo("reserved tea");
            Performed<Object> next = DurableTesting.step(fulfil, "reserve").state(new Order("cup", 1))
                    .transaction(connection).perform();
            assertThat(next.kind()).isEqualTo(Performed.Kind.NEXT);
            // What the handlers wrote is in the test's transaction, for it to read (and roll back).
            assertThat(Flux.from(connection.createStatement("SELECT sku || quantity FROM reservations ORDER BY sku")
                            .execute()).flatMap(result -> result.map(row -> row.get(0, String.class))).collectList().block())
                    .containsExactly("cup1", "tea2");
        } finally {
            Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())).block();
        }
        assertThatThrownBy(() -> DurableTesting.perform(reserve, new Order("tea", 2)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is transactional: perform it with a"
                        + " connection of yours");
        assertThatThrownBy(() -> DurableTesting.perform(PRICE, new Order("tea", 2), connection))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is not transactional");
    }
}
