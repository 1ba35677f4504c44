package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 33: a run completed from the caller's own transaction ({@code engine.complete} and its
 * siblings with a connection): the caller's writes and the outcome commit together or not at all,
 * guarded by the run's claim like the engine's own commit.
 */
@ExtendWith(PostgresExtension.class)
class CallerCompletionIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
        TransactionalIT.effectsTable(db);
    }

    /** {@code work} inside a transaction of the caller's own pool, committed, or rolled back when asked. */
    private <T> Mono<T> inCallersTransaction(boolean commit, Function<Connection, Mono<T>> work) {
        return Mono.usingWhen(db.connectionFactory().create(),
                connection -> Mono.from(connection.beginTransaction())
                        .then(work.apply(connection).map(Optional::of).defaultIfEmpty(Optional.empty()))
                        .flatMap(value -> Mono.from(commit ? connection.commitTransaction()
                                : connection.rollbackTransaction()).then(Mono.justOrEmpty(value))),
                Connection::close,
                (connection, error) -> Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())),
                connection -> Mono.from(connection.close()));
    }

    private List<Integer> effects(long id) {
        return Sql.query(db, "SELECT attempt FROM {schema}.effects WHERE instance_id = $1 ORDER BY attempt",
                row -> row.get(0, Integer.class), id);
    }

    @Test
    void aRunCompletedInTheCallersTransactionSettlesWithItsWritesOrNotAtAll() {
        DurableEngine[] engine = new DurableEngine[1];
        JobDefinition<String, String> ship = JobDefinition.of("ship", String.class,
                (String order, JobContext context) -> inCallersTransaction(!order.equals("rolled back"), connection ->
                                TransactionalIT.effect(connection, db.schema(), context.id(), context.attempt(), order)
                                        .then(order.equals("failed")
                                                ? engine[0].fail(connection, context.claim(), "out of stock")
                                                : engine[0].complete(connection, context.claim(), "by the caller"))
                                        .thenReturn("by the caller"))
                        // The handler's own outcome comes after: stale once the caller's commit settled the run.
                        .thenReturn("by the handler"))
                .queue("caller");
        engine[0] = engines.start(engines.options("caller").queue(TransactionalIT.queue("caller", 2)), ship);

        long completed = engine[0].insert(JobRequest.of("ship", "parcel")).block();
        Instance done = engines.awaitSettled(engine[0], completed, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"by the caller\"");
        assertThat(effects(completed)).containsExactly(1);

        long failed = engine[0].insert(JobRequest.of("ship", "failed")).block();
        Instance refused = engines.awaitSettled(engine[0], failed, WAIT);
        assertThat(refused.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(refused.lastError()).isEqualTo("out of stock");

        // The caller rolled back: neither its write nor its outcome; the run's own outcome stands.
        long rolledBack = engine[0].insert(JobRequest.of("ship", "rolled back")).block();
        Instance own = engines.awaitSettled(engine[0], rolledBack, WAIT);
        assertThat(own.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(own.resultJson()).isEqualTo("\"by the handler\"");
        assertThat(effects(rolledBack)).isEmpty();
    }

    @Test
    void aCallerSettlesAWorkflowStepOrCancelsItsInstance() {
        DurableEngine[] engine = new DurableEngine[1];
        WorkflowDefinition<String> review = WorkflowDefinition.builder("review", String.class)
                .step("submit", context -> inCallersTransaction(true, connection ->
                                TransactionalIT.effect(connection, db.schema(), context.id(), context.attempt(),
                                                context.state())
                                        .then(context.state().equals("withdrawn")
                                                ? engine[0].cancel(connection, context.claim())
                                                : engine[0].complete(connection, context.claim(), context.state() + " accepted")))
                        // Stale once the caller committed: never the instance's outcome.
                        .thenReturn(Outcome.<String>next("approve", "never committed")))
                .step("approve", context -> Mono.just(Outcome.done("approved " + context.state())))
                .queue("caller-flow")
                .build();
        engine[0] = engines.start(engines.options("caller-flow").queue(TransactionalIT.queue("caller-flow", 2)),
                review);
        long accepted = engine[0].insert(JobRequest.of("review", "paper")).block();
        long withdrawn = engine[0].insert(JobRequest.of("review", "withdrawn")).block();
        Instance done = engines.awaitSettled(engine[0], accepted, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"paper accepted\"");
        assertThat(effects(accepted)).containsExactly(1);
        Instance cancelled = engines.awaitSettled(engine[0], withdrawn, WAIT);
        assertThat(cancelled.status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(effects(withdrawn)).containsExactly(1);
    }

    @Test
    void aCompletionOfAnInstanceWhoseCancelWasRequestedIsRefused() {
        DurableEngine[] engine = new DurableEngine[1];
        AtomicReference<Throwable> refused = new AtomicReference<>();
        JobDefinition<String, String> late = JobDefinition.of("late", String.class,
                (String order, JobContext context) -> Mono.fromCallable(() -> Sql.update(db,
                                // As another node's cancel leaves it: requested, this run not yet told.
                                "UPDATE {schema}.durable_instances SET cancel_requested = true WHERE id = $1",
                                context.id()))
                        .subscribeOn(Schedulers.boundedElastic())
                        .then(inCallersTransaction(true, connection -> TransactionalIT.effect(connection, db.schema(),
                                        context.id(), context.attempt(), order)
                                .then(engine[0].complete(connection, context.claim(), "shipped"))))
                        .doOnError(refused::set)
                        .onErrorResume(StaleOutcomeException.class, error -> Mono.empty())
                        .thenReturn("by the handler"))
                .queue("caller-cancel");
        // A slow heartbeat: the run does not hear of the cancel (and stop) before its caller completes it.
        engine[0] = engines.start(engines.options("caller-cancel").leaseTtl(Duration.ofSeconds(30))
                .heartbeatInterval(Duration.ofSeconds(10)).queue(TransactionalIT.queue("caller-cancel", 1)), late);
        long id = engine[0].insert(JobRequest.of("late", "parcel")).block();
        assertThat(engines.awaitSettled(engine[0], id, WAIT).status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(refused.get()).isInstanceOf(StaleOutcomeException.class)
                .hasMessage("outcome of instance " + id + " dropped: its cancel was requested (roll back: the run"
                        + " ends it cancelled)");
        assertThat(effects(id)).as("the caller rolled back").isEmpty();
    }

    @Test
    void aClaimUsedAfterItsRunWentOnInlineIsRefused() {
        // Step 'first' goes on inline to 'second' on the same claim (same worker, attempt 1 again): the
        // first step's claim, used while the second runs, must not settle it.
        AtomicReference<Claim> first = new AtomicReference<>();
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicReference<Claim> second = new AtomicReference<>();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("chain", String.class)
                .step("first", context -> {
                    first.set(context.claim());
                    return Mono.just(Outcome.next("second", context.state()).inline());
                })
                .step("second", context -> {
                    second.set(context.claim());
                    return gate.asMono().thenReturn(Outcome.<String>done("second's own"));
                })
                .queue("caller-inline")
                .build();
        DurableEngine engine = engines.start(engines.options("caller-inline")
                .queue(TransactionalIT.queue("caller-inline", 1)), chain);
        long id = engine.insert(JobRequest.of("chain", "x")).block();
        Eventually.until("the second step runs", WAIT, () -> second.get() != null);
        assertThat(second.get().worker()).isEqualTo(first.get().worker());
        assertThat(second.get().attempt()).isEqualTo(first.get().attempt());

        assertThatThrownBy(() -> inCallersTransaction(true, connection ->
                        engine.complete(connection, first.get(), "by a late caller")).block())
                .isInstanceOf(StaleOutcomeException.class);
        gate.tryEmitEmpty();
        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.resultJson()).isEqualTo("\"second's own\"");
    }

    /**
     * The claim's stamp (the transaction that made it) is part of the guard: the run's own claim with
     * any other stamp is another claim, refused before anything is written; the run's own passes.
     */
    @Test
    void theRunsClaimWithAnotherStampIsRefused() {
        DurableEngine[] engine = new DurableEngine[1];
        AtomicReference<Throwable> refused = new AtomicReference<>();
        JobDefinition<String, String> stamped = JobDefinition.of("stamped", String.class,
                (String order, JobContext context) -> {
                    Claim own = context.claim();
                    Claim other = new Claim(own.id(), own.type(), own.step(), own.worker(), own.attempt(),
                            own.stamp() + 1);
                    return inCallersTransaction(true, connection -> engine[0].complete(connection, other, "other"))
                            .doOnError(refused::set)
                            .onErrorResume(StaleOutcomeException.class, stale -> Mono.empty())
                            .then(inCallersTransaction(true, connection -> engine[0].complete(connection, own, "own")))
                            .thenReturn("by the handler");
                })
                .queue("caller-stamped");
        engine[0] = engines.start(engines.options("caller-stamped").queue(TransactionalIT.queue("caller-stamped", 1)),
                stamped);
        long id = engine[0].insert(JobRequest.of("stamped", "x")).block();
        Instance done = engines.awaitSettled(engine[0], id, WAIT);
        assertThat(refused.get()).isInstanceOf(StaleOutcomeException.class);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"own\"");
    }

    @Test
    void aClaimThatIsNoLongerCurrentIsRefusedAndTheCallerRollsBack() {
        JobDefinition<String, String> idle = JobDefinition.of("idle", String.class, (String s) -> Mono.just(s))
                .queue("caller-stale");
        DurableEngine engine = engines.start(engines.options("caller-stale")
                .queue(TransactionalIT.queue("caller-stale", 1)), idle);
        long id = engine.insert(JobRequest.of("idle", "x")).block();
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);

        Claim settled = new Claim(id, "idle", JobDefinition.STEP, "caller-stale:someone", 1);
        assertThatThrownBy(() -> inCallersTransaction(true, connection ->
                        TransactionalIT.effect(connection, db.schema(), id, 1, "late")
                                .then(engine.complete(connection, settled, "late"))).block())
                .isInstanceOf(StaleOutcomeException.class)
                .hasMessageContaining("outcome of instance " + id + " dropped");
        assertThat(effects(id)).as("the caller rolled back on the refusal").isEmpty();

        assertThatThrownBy(() -> engine.complete(null, settled, "x").block()).isInstanceOf(InvalidRequestException.class)
                .hasMessage("connection must not be null");
        assertThatThrownBy(() -> engine.cancel(db.connectionFactory().create().block(), null).block())
                .isInstanceOf(InvalidRequestException.class).hasMessage("claim must not be null");
        // A connection with no transaction open: the outcome would commit apart from the caller's work.
        assertThatThrownBy(() -> Mono.usingWhen(db.connectionFactory().create(),
                        connection -> engine.complete(connection, settled, "x"), Connection::close).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("no transaction open");
        assertThatThrownBy(() -> inCallersTransaction(true, connection -> engine.fail(connection, settled, " "))
                .block()).isInstanceOf(InvalidRequestException.class).hasMessage("error must not be blank");
    }
}
