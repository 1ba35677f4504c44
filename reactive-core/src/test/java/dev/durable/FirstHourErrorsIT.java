package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * The mistakes of a first hour, each answered at the edge with a typed error that says what to do:
 * wrong-shaped arguments, an insert before start, a null request, a queue name no engine can run,
 * an await or cancel of an id that does not exist; and a close that really drains.
 */
@ExtendWith(PostgresExtension.class)
class FirstHourErrorsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    record Email(String to, String subject) {
    }

    record Order(String id, List<Line> lines) {
    }

    record Line(String sku, int quantity) {
    }

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private DurableEngine producer() {
        return engines.start(engines.options("producer"),
                JobDefinition.of("send-email", Email.class, (Email email) -> Mono.just(email.to())).queue("mail"),
                JobDefinition.of("count", Integer.class, (Integer n) -> Mono.just(n)).queue("mail"),
                WorkflowDefinition.builder("order", Order.class).queue("orders")
                        .step("start", ctx -> Mono.just(Outcome.done(ctx.state().id()))).build());
    }

    @Test
    void argumentsOfTheWrongShapeAreRefusedAtInsertNamingTheField() {
        DurableEngine engine = producer();
        assertThatThrownBy(() -> engine.insert(JobRequest.of("send-email", "ada@example.com")).block())
                .isInstanceOf(InvalidArgumentsException.class)
                .hasMessageContaining("arguments of type 'send-email' do not fit")
                .hasMessageContaining(Email.class.getName());
        assertThatThrownBy(() -> engine.insert(JobRequest.of("order",
                        Map.of("id", "o-1", "lines", List.of(Map.of("sku", "book", "quantity", "many"))))).block())
                .isInstanceOfSatisfying(InvalidArgumentsException.class, misfit -> {
                    assertThat(misfit.type()).isEqualTo("order");
                    assertThat(misfit.field()).isEqualTo("lines[0].quantity");
                })
                .hasMessageContaining("at field 'lines[0].quantity'");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("count", Map.of("n", 1))).block())
                .isInstanceOf(InvalidArgumentsException.class);
        // What fits goes in: the record itself, or a map of the same shape from a JSON API.
        assertThat(engine.insert(JobRequest.of("send-email", new Email("ada@example.com", "hi"))).block()).isPositive();
        assertThat(engine.insert(JobRequest.of("order",
                Map.of("id", "o-2", "lines", List.of(Map.of("sku", "book", "quantity", 2))))).block()).isPositive();
        assertThat(engine.insert(JobRequest.of("count", 7)).block()).isPositive();
        // Nothing of the refused requests was written.
        assertThat(engine.list("mail", null, 0, 100).collectList().block()).hasSize(2);
        assertThat(engine.list("orders", null, 0, 100).collectList().block()).hasSize(1);
    }

    @Test
    void anInsertBeforeTheSchemaExistsSaysToStartTheEngine() {
        DurableEngine engine = engines.build(db.engineOptions().schema("never_migrated").name("unstarted"),
                JobDefinition.of("send-email", Email.class, (Email email) -> Mono.just(email.to())));
        assertThatThrownBy(() -> engine.insert(JobRequest.of("send-email", new Email("a@b.c", "x"))).block())
                .isInstanceOf(SchemaMissingException.class)
                .hasMessageContaining("never_migrated")
                .hasMessageContaining("Start the engine first");
        assertThatThrownBy(() -> engine.get(1).block()).isInstanceOf(SchemaMissingException.class);
    }

    @Test
    void nullsAreTypedErrors() {
        DurableEngine engine = producer();
        assertThatThrownBy(() -> engine.insert((JobRequest) null).block())
                .isInstanceOf(InvalidRequestException.class).hasMessage("request must not be null");
        assertThatThrownBy(() -> engine.insertAsync(null).block())
                .isInstanceOf(InvalidRequestException.class).hasMessage("request must not be null");
        assertThatThrownBy(() -> engine.insertAll(null).block())
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> engine.insert(null, JobRequest.of("count", 1)).block())
                .isInstanceOf(InvalidRequestException.class).hasMessage("connection must not be null");
    }

    @Test
    void aQueueNoEngineCouldRunIsRefusedAndOneNobodyRunsNowIsWarnedAbout() {
        DurableEngine engine = producer();
        assertThatThrownBy(() -> engine.insert(JobRequest.of("count", 1).queue("mail queue")).block())
                .isInstanceOf(InvalidRequestException.class)
                .hasMessageContaining("queue must be 1 to 128 letters, digits")
                .hasMessageContaining("'mail queue'");
        assertThatThrownBy(() -> QueueOptions.builder("mail queue"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("queue name must be");
        assertThatThrownBy(() -> JobDefinition.of("x", String.class, (String s) -> Mono.just(s)).queue("a/b"))
                .isInstanceOf(IllegalArgumentException.class);

        // A client (never started) inserting into a queue no live engine runs hears of it in the log.
        DurableEngine client = engines.build(engines.options("client"),
                JobDefinition.of("count", Integer.class, (Integer n) -> Mono.just(n)).queue("nobody-runs-this"));
        String log = stderrDuring(() -> {
            assertThat(client.insert(JobRequest.of("count", 1)).block()).isPositive();
            Eventually.sleep(1000);
        });
        assertThat(log).contains("inserted into queue 'nobody-runs-this', which no live engine runs");
    }

    @Test
    void callsOnAnUnknownIdSayWhatWasAsked() {
        DurableEngine engine = producer();
        assertThatThrownBy(() -> engine.awaitSettled(987_654, Duration.ofSeconds(5)).block())
                .isInstanceOf(NoTargetException.class).hasMessage("no instance with id 987654 to await");
        assertThatThrownBy(() -> engine.awaitSettledOrCurrent(987_654, Duration.ofSeconds(5)).block())
                .isInstanceOf(NoTargetException.class).hasMessage("no instance with id 987654 to await");
        assertThatThrownBy(() -> engine.signal(987_654, "paid", null, null).block())
                .isInstanceOf(NoTargetException.class).hasMessage("no live instance with id 987654 to signal");
        assertThat(engine.cancel(987_654).block()).isEqualTo(CancelResult.NOT_FOUND);
    }

    @Test
    void closeFromTryWithResourcesDrainsTheRunningWork() throws Exception {
        CountDownLatch started = new CountDownLatch(1);
        AtomicBoolean finished = new AtomicBoolean();
        long id;
        try (DurableEngine engine = DurableEngine.builder(engines.options("closing")
                        .queue(QueueOptions.builder("slow").drainTimeout(Duration.ofSeconds(30)).build()).build())
                .register(JobDefinition.ofBlocking("slow", String.class, (String s) -> {
                    started.countDown();
                    Thread.sleep(500);
                    finished.set(true);
                    return "finished";
                }).queue("slow"))
                .build()) {
            engine.start().block(WAIT);
            id = engine.insert(JobRequest.of("slow", "x")).block();
            Eventually.until("the job started", WAIT, () -> started.getCount() == 0);
            assertThat(engine.closeTimeout()).isGreaterThan(Duration.ofSeconds(30));
        }
        // close() returned only once the running job had finished and committed.
        assertThat(finished).isTrue();
        DurableEngine reader = engines.build(engines.options("reader"));
        Instance done = reader.get(id).block();
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"finished\"");
    }

    /** What slf4j-simple (which writes to the System.err of the moment) logged while {@code work} ran. */
    private static String stderrDuring(Runnable work) {
        PrintStream original = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            work.run();
        } finally {
            System.setErr(original);
        }
        String text = captured.toString(StandardCharsets.UTF_8);
        original.print(text);
        return text;
    }
}
