package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Bad input at run time (issue 10): what a handler returns that cannot be stored, state that does
 * not decode, children the database refuses. Each ends in a failed status with the reason on the
 * first attempt: never a stuck row, never a crash loop through the reaper. And secrets: a password
 * in the URL never reaches the logs or a toString. (Unknown types, malformed job arguments and
 * unknown steps are in ExecutorIT and WorkflowIT.)
 */
@ExtendWith(PostgresExtension.class)
class BadInputIT {

    private static final Duration WAIT = Duration.ofSeconds(20);

    record Shape(String name, int size) {
    }

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private DurableEngine engine(String name, String queue, Definition... definitions) {
        return engines.start(engines.options(name).maxPayloadBytes(1024).queue(QueueOptions.builder(queue)
                .concurrency(8).pollInterval(Duration.ofMillis(50)).build()), definitions);
    }

    @Test
    void whatAStepReturnsThatCannotBeStoredFailsTheInstanceAtOnceWithTheReason() {
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("returns", String.class).queue("returns")
                .step("start", ctx -> Mono.just(switch (ctx.state()) {
                    case "nul" -> Outcome.next("never", "a\u0000b");
                    case "surrogate" -> Outcome.next("never", "a\ud800b");
                    case "big" -> Outcome.next("never", "x".repeat(5000));
                    default -> Outcome.<String>done("y".repeat(5000));
                }))
                .step("never", ctx -> Mono.just(Outcome.done(null)))
                .build();
        DurableEngine engine = engine("returns", "returns", flow);
        Map<String, String> reasons = Map.of("nul", "NUL character", "surrogate", "lone surrogate",
                "big", "above the limit of 1024", "result", "above the limit of 1024");
        for (Map.Entry<String, String> input : reasons.entrySet()) {
            long id = engine.insert(JobRequest.of("returns", input.getKey())).block();
            Instance failed = engine.awaitSettled(id, WAIT).block();
            assertThat(failed.status()).as(input.getKey()).isEqualTo(InstanceStatus.FAILED);
            assertThat(failed.lastError()).as(input.getKey()).contains(input.getValue());
            assertThat(failed.attempt()).as(input.getKey()).isEqualTo(1);
            assertThat(failed.step()).isEqualTo("start");
        }
    }

    @Test
    void stateThatDoesNotDecodeFailsTheInstanceWithTheReason() {
        WorkflowDefinition<Shape> shapes = WorkflowDefinition.builder("shapes", Shape.class).queue("shapes")
                .step("start", ctx -> Mono.just(Outcome.done(ctx.state().size())))
                .build();
        DurableEngine engine = engine("shapes", "shapes", shapes);
        // A producer whose definition of the type takes any state (an older release, say): the insert
        // check, which refuses what does not fit the definition, passes, and the run finds the misfit.
        WorkflowDefinition<Object> loose = WorkflowDefinition.builder("shapes", Object.class).queue("shapes")
                .step("start", ctx -> Mono.just(Outcome.done(null)))
                .build();
        DurableEngine producer = engines.start(engines.options("producer"), loose); // runs no queue
        long malformed = producer.insert(JobRequest.of("shapes", List.of("not", "a", "shape")).queue("shapes")).block();
        Instance failed = engine.awaitSettled(malformed, WAIT).block();
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.lastError()).startsWith("malformed state for " + Shape.class.getName());
        assertThat(failed.attempt()).isEqualTo(1);
    }

    @Test
    void childrenTheDatabaseRefusesFailTheirParentOnceAndSpareTheOutcomesCommittedBesideIt() {
        DurableEngine producer = engines.start(engines.options("producer").rejectUnknownTypes(false));
        // A live instance holds the key (its queue has no worker here).
        producer.insert(JobRequest.of("holder", null).queue("parked").correlationKey("taken")).block();
        WorkflowDefinition<String> parent = WorkflowDefinition.builder("parent", String.class).queue("family")
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(
                        List.of(JobRequest.of("child", "c").correlationKey(ctx.state())), "join", ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done(null)))
                .build();
        JobDefinition<String, String> child = JobDefinition.of("child", String.class, (String s) -> Mono.just(s))
                .queue("family");
        JobDefinition<String, String> plain = JobDefinition.of("plain", String.class,
                (String s) -> Mono.delay(Duration.ofMillis(20)).thenReturn(s)).queue("family");
        DurableEngine engine = engine("family", "family", parent, child, plain);

        List<JobRequest> requests = new ArrayList<>();
        requests.add(JobRequest.of("parent", "taken"));
        for (int i = 0; i < 30; i++) {
            requests.add(JobRequest.of("plain", "p" + i));
        }
        requests.add(JobRequest.of("parent", "free"));
        List<Long> ids = engine.insertAll(requests).block();

        // At once, on its first attempt: not after 20 lease expiries through the reaper.
        Instance refused = engine.awaitSettled(ids.get(0), WAIT).block();
        assertThat(refused.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(refused.lastError()).contains("refused by the database").contains("'taken'");
        assertThat(refused.attempt()).isEqualTo(1);
        assertThat(engine.awaitSettled(ids.get(ids.size() - 1), WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
        for (long id : ids.subList(1, ids.size() - 1)) {
            Instance done = engine.awaitSettled(id, WAIT).block();
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(done.attempt()).as("committed on its first attempt").isEqualTo(1);
        }
    }

    @Test
    void aPasswordInTheUrlNeverReachesTheLogsOrToString() {
        String password = "Pa55-w0rd-s3cr3t";
        ConnectionFactoryOptions parsed = ConnectionFactoryOptions.parse(db.url());
        Object realPassword = parsed.getValue(ConnectionFactoryOptions.PASSWORD);
        if (realPassword != null && System.getenv("DURABLE_PG_URL") != null) {
            password = realPassword.toString(); // a real server checks it: use its own
        }
        String url = "r2dbc:postgresql://" + parsed.getValue(ConnectionFactoryOptions.USER) + ":" + password + "@"
                + parsed.getValue(ConnectionFactoryOptions.HOST) + ":" + parsed.getValue(ConnectionFactoryOptions.PORT)
                + "/" + parsed.getValue(ConnectionFactoryOptions.DATABASE);
        String unreachable = "r2dbc:postgresql://someone:" + password + "@localhost:1/nowhere?password=" + password;
        // Unencoded '@' and '/' in the password: a regex that stops at the first '@' prints the tail.
        String tricky = "Tr1cky@pa55/w0rd";
        String trickyUrl = "r2dbc:postgresql://someone:" + tricky + "@localhost:1/nowhere?sslPassword=" + tricky;

        PrintStream stderr = System.err;
        PrintStream stdout = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream capture = new PrintStream(captured, true, StandardCharsets.UTF_8);
        List<String> texts = new ArrayList<>();
        try {
            System.setErr(capture);
            System.setOut(capture);
            DurableEngine engine = engines.start(db.engineOptions().url(url).name("secret").queue("secret"),
                    JobDefinition.of("ping", String.class, (String s) -> Mono.just(s)).queue("secret"));
            long id = engine.insert(JobRequest.of("ping", "x")).block();
            engine.awaitSettled(id, WAIT).block();
            texts.add(engine.toString());
            texts.add(engine.options().toString());

            for (String bad : List.of(unreachable, unreachable.substring(0, unreachable.indexOf('?')), trickyUrl)) {
                try {
                    DurableEngine broken = engines.build(db.engineOptions().url(bad).name("broken"));
                    texts.add(broken.toString());
                    broken.start().block(WAIT);
                } catch (RuntimeException expected) {
                    for (Throwable cause = expected; cause != null; cause = cause.getCause()) {
                        texts.add(cause.toString());
                    }
                }
            }
            try {
                EngineOptions.builder().url("postgresql://u:" + password + "@h/db");
            } catch (IllegalArgumentException expected) {
                texts.add(expected.getMessage());
            }
            engine.closeLater().block(WAIT);
        } finally {
            System.setErr(stderr);
            System.setOut(stdout);
        }
        String logged = captured.toString(StandardCharsets.UTF_8);
        String secret = password;
        assertThat(logged).as("the engine logged at start and close").contains("Durable engine secret started");
        assertThat(logged).doesNotContain(secret);
        assertThat(texts).isNotEmpty().allSatisfy(text -> assertThat(text).doesNotContain(secret)
                .doesNotContain("Tr1cky").doesNotContain("pa55/w0rd"));
        assertThat(logged).doesNotContain("Tr1cky").doesNotContain("pa55/w0rd");
        assertThat(texts.get(0)).contains("****");
    }
}
