package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.support.TcpProxy;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Issue 33: a transactional handler's writes and its outcome commit together or not at all. Each
 * test's handler writes an effect row (instance, attempt) in its transaction; the assertions count
 * them: exactly one for a done instance, none for a failed or cancelled one, whatever came between
 * the write and the commit (an error, a timeout, a cancel, a lost claim, a dropped connection; a
 * killed JVM in {@link TransactionalCrashIT}).
 */
@ExtendWith(PostgresExtension.class)
class TransactionalIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
        effectsTable(db);
    }

    /** An empty table of effects, (instance, attempt, note) with no key, so a duplicate shows. */
    static void effectsTable(TestDatabase db) {
        db.execute("CREATE SCHEMA IF NOT EXISTS \"" + db.schema() + "\"");
        db.execute("CREATE TABLE IF NOT EXISTS \"" + db.schema() + "\".effects (instance_id bigint NOT NULL,"
                + " attempt int NOT NULL, note text)");
        db.execute("TRUNCATE \"" + db.schema() + "\".effects");
    }

    /** A type whose first attempt writes its effect, counts itself, then waits for {@code gate}; later ones just write. */
    private JobDefinition<String, String> firstAttemptHolds(String type, String queue, Sinks.Empty<Void> gate,
            AtomicInteger firstWrites) {
        return JobDefinition.transactional(type, String.class,
                        (String what, JobContext context, Connection transaction) ->
                                effect(transaction, db.schema(), context.id(), context.attempt(), what)
                                        .then(context.attempt() == 1
                                                ? Mono.fromRunnable(firstWrites::incrementAndGet).then(gate.asMono())
                                                        .thenReturn("first")
                                                : Mono.just("second")))
                .queue(queue);
    }

    static QueueOptions queue(String name, int concurrency) {
        return QueueOptions.builder(name).concurrency(concurrency).prefetch(0).pollInterval(Duration.ofMillis(50))
                .maxPollInterval(Duration.ofMillis(200)).build();
    }

    /** The effect of a run, written on its transaction. */
    static Mono<Void> effect(Connection transaction, String schema, long id, int attempt, String note) {
        return Flux.from(transaction.createStatement("INSERT INTO \"" + schema + "\".effects (instance_id, attempt,"
                        + " note) VALUES ($1, $2, $3)").bind(0, id).bind(1, attempt).bind(2, note).execute())
                .flatMap(Result::getRowsUpdated)
                .then();
    }

    private List<Integer> effects(long id) {
        return Sql.query(db, "SELECT attempt FROM {schema}.effects WHERE instance_id = $1 ORDER BY attempt",
                row -> row.get(0, Integer.class), id);
    }

    @Test
    void aHandlersWritesCommitWithItsOutcomeAndRollBackWithItsErrors() {
        JobDefinition<String, String> credit = JobDefinition.transactional("credit", String.class,
                (String account, JobContext context, Connection transaction) ->
                        effect(transaction, db.schema(), context.id(), context.attempt(), account)
                                // The first attempt of 'flaky' fails after its write; the write goes with it.
                                .then(account.equals("flaky") && context.attempt() == 1
                                        ? Mono.error(new IllegalStateException("downstream refused"))
                                        : account.equals("doomed") ? Mono.error(new IllegalStateException("never"))
                                        : Mono.just("credited " + account)))
                .queue("tx").backoff(Backoff.fixed(Duration.ofMillis(50)));
        DurableEngine engine = engines.start(engines.options("tx").queue(queue("tx", 4)), credit);

        long plain = engine.insert(JobRequest.of("credit", "alice")).block();
        long flaky = engine.insert(JobRequest.of("credit", "flaky")).block();
        long doomed = engine.insert(JobRequest.of("credit", "doomed").maxAttempts(2)).block();

        Instance done = engines.awaitSettled(engine, plain, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"credited alice\"");
        assertThat(effects(plain)).containsExactly(1);
        Instance retried = engines.awaitSettled(engine, flaky, WAIT);
        assertThat(retried.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(retried.attempt()).isEqualTo(2);
        assertThat(effects(flaky)).as("the failed attempt's write rolled back").containsExactly(2);
        Instance failed = engines.awaitSettled(engine, doomed, WAIT);
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.lastError()).contains("never");
        assertThat(effects(doomed)).as("a failed job leaves no effect").isEmpty();
    }

    @Test
    void aTransactionalStepCommitsItsWritesWithItsTransition() {
        WorkflowDefinition<Integer> order = WorkflowDefinition.builder("order", Integer.class)
                .step("reserve", StepHandler.<Integer>transactional((context, transaction) ->
                        effect(transaction, db.schema(), context.id(), context.attempt(), "reserve")
                                .thenReturn(Outcome.next("pay", context.state() + 1).inline())))
                .step("pay", context -> Mono.just(Outcome.next("ship", context.state() + 1)))
                .step("ship", StepHandler.<Integer>transactional((context, transaction) ->
                        effect(transaction, db.schema(), context.id(), context.attempt(), "ship")
                                .then(context.attempt() == 1 ? Mono.error(new IllegalStateException("carrier down"))
                                        : Mono.just(Outcome.<Integer>done(context.state() + 1)))))
                .queue("tx-flow").backoff(Backoff.fixed(Duration.ofMillis(50)))
                .build();
        DurableEngine engine = engines.start(engines.options("tx-flow").queue(queue("tx-flow", 2)), order);
        long id = engine.insert(JobRequest.of("order", 0)).block();

        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("3");
        List<String> notes = Sql.query(db, "SELECT note || ':' || attempt FROM {schema}.effects WHERE instance_id = $1"
                + " ORDER BY note", row -> row.get(0, String.class), id);
        assertThat(notes).as("one write a step, the failed attempt's rolled back").containsExactly("reserve:1", "ship:2");
    }

    @Test
    void aCancelOrATimeoutRollsTheWritesBack() {
        Sinks.Empty<Void> never = Sinks.empty();
        AtomicInteger written = new AtomicInteger();
        JobHandler.InTransaction<String, String> hangs = (String what, JobContext context, Connection transaction) ->
                effect(transaction, db.schema(), context.id(), context.attempt(), what)
                        .doOnSuccess(nothing -> written.incrementAndGet())
                        // 'slow' hangs on its first attempt only (the type's timeout cuts it).
                        .then(what.equals("slow") && context.attempt() > 1 ? Mono.just("in time")
                                : never.asMono().thenReturn("never"));
        // The cancelled one has the default timeout: a slow machine must not time it out first.
        JobDefinition<String, String> hold = JobDefinition.transactional("hold", String.class, hangs).queue("tx-hold");
        JobDefinition<String, String> slowOne = JobDefinition.transactional("slow-one", String.class, hangs)
                .queue("tx-hold").timeout(Duration.ofSeconds(2)).backoff(Backoff.fixed(Duration.ofMillis(50)));
        DurableEngine engine = engines.start(engines.options("tx-hold").queue(queue("tx-hold", 4)), hold, slowOne);

        long cancelled = engine.insert(JobRequest.of("hold", "cancel me").maxAttempts(1)).block();
        Eventually.until("the write is made", WAIT, () -> written.get() >= 1);
        engine.cancel(cancelled).block();
        assertThat(engines.awaitSettled(engine, cancelled, WAIT).status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(effects(cancelled)).as("a cancelled run's write rolled back").isEmpty();

        long slow = engine.insert(JobRequest.of("slow-one", "slow")).block();
        Instance done = engines.awaitSettled(engine, slow, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.attempt()).isEqualTo(2);
        assertThat(effects(slow)).as("the timed-out attempt's write rolled back").containsExactly(2);
    }

    @Test
    void aCancelRequestedUnseenWhileTheHandlerRanRollsItsWritesBackAtTheCommit() {
        // Found by the chaos harness (tx_effects): the commit turns the outcome of a row whose cancel
        // was requested into a cancel; the writes of the outcome the handler decided must not stay.
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger written = new AtomicInteger();
        JobDefinition<String, String> refund = JobDefinition.transactional("refund", String.class,
                (String what, JobContext context, Connection transaction) ->
                        effect(transaction, db.schema(), context.id(), context.attempt(), what)
                                .then(Mono.fromRunnable(written::incrementAndGet))
                                .then(gate.asMono())
                                .thenReturn("refunded"))
                .queue("tx-late-cancel");
        // A slow heartbeat: the run does not hear of the cancel before it commits.
        DurableEngine engine = engines.start(engines.options("tx-late-cancel").leaseTtl(Duration.ofSeconds(30))
                .heartbeatInterval(Duration.ofSeconds(10)).queue(queue("tx-late-cancel", 2)), refund);
        long id = engine.insert(JobRequest.of("refund", "order 4")).block();
        Eventually.until("the write is made", WAIT, () -> written.get() == 1);
        // As another node's cancel leaves it: requested on the row, the running node not yet told.
        Sql.update(db, "UPDATE {schema}.durable_instances SET cancel_requested = true WHERE id = $1", id);
        gate.tryEmitEmpty();

        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(effects(id)).as("a cancelled instance keeps no effect").isEmpty();
    }

    @Test
    void aClaimLostMeanwhileRollsTheWritesBackAndTheNextClaimsWritesStand() {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger firstWrites = new AtomicInteger();
        JobDefinition<String, String> pay = firstAttemptHolds("pay", "tx-lost", gate, firstWrites);
        // The heartbeat is slow here (leases of 30 s): the guard, not the heartbeat, must find the loss.
        DurableEngine engine = engines.start(engines.options("tx-lost").leaseTtl(Duration.ofSeconds(30))
                .heartbeatInterval(Duration.ofSeconds(10)).queue(queue("tx-lost", 2)), pay);
        long id = engine.insert(JobRequest.of("pay", "invoice 9")).block();
        Eventually.until("the first attempt wrote", WAIT, () -> firstWrites.get() == 1);

        // Another node took the row meanwhile (as after a lapsed lease), and lost it in turn: its
        // lease is over, so the reaper gives the row back for a third claim.
        Sql.update(db, "UPDATE {schema}.durable_instances SET claimed_by = 'thief', attempt = attempt + 1,"
                + " lease_expires_at = now() - interval '1 second' WHERE id = $1", id);
        gate.tryEmitEmpty();

        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"second\"");
        assertThat(effects(id)).as("the stale run's write rolled back with its refused outcome").containsExactly(3);
    }

    @Test
    void aDroppedConnectionBetweenTheWriteAndTheCommitLeavesNeither() {
        try (TcpProxy proxy = TcpProxy.forUrl(db.url())) {
            Sinks.Empty<Void> gate = Sinks.empty();
            AtomicInteger firstWrites = new AtomicInteger();
            JobDefinition<String, String> ship = firstAttemptHolds("ship", "tx-cut", gate, firstWrites);
            DurableEngine engine = engines.start(engines.options("tx-cut").url(proxy.proxiedUrl(db.url()))
                    .callTimeout(Duration.ofSeconds(3)).queue(queue("tx-cut", 2)), ship);
            long id = engine.insert(JobRequest.of("ship", "parcel")).block();
            Eventually.until("the first attempt wrote", WAIT, () -> firstWrites.get() == 1);

            proxy.closeAll(); // every connection of the engine drops, the run's transaction with them
            gate.tryEmitEmpty();

            Instance done = engines.awaitSettled(engine, id, WAIT);
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(done.attempt()).isEqualTo(2);
            assertThat(effects(id)).as("the dropped transaction took its write along").containsExactly(2);
        }
    }

    @Test
    void theTransactionIsTheEnginesToEndAndNeverOutlivesItsRun() {
        AtomicReference<Connection> leaked = new AtomicReference<>();
        JobDefinition<String, String> rogue = JobDefinition.transactional("rogue", String.class,
                (String what, JobContext context, Connection transaction) -> {
                    leaked.set(transaction);
                    Mono<Void> write = effect(transaction, db.schema(), context.id(), context.attempt(), what);
                    return what.equals("commits") ? write.then(Mono.from(transaction.commitTransaction()))
                            .thenReturn("committed by hand") : write.thenReturn("kept");
                })
                .queue("tx-rogue");
        DurableEngine engine = engines.start(engines.options("tx-rogue").queue(queue("tx-rogue", 2)), rogue);

        long commits = engine.insert(JobRequest.of("rogue", "commits")).block();
        Instance failed = engines.awaitSettled(engine, commits, WAIT);
        assertThat(failed.status()).as("a mistake, not a passing fault: failed at once").isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.attempt()).isEqualTo(1);
        assertThat(failed.lastError()).contains(StepTransactionException.class.getName()).contains("commitTransaction");
        assertThat(effects(commits)).isEmpty();

        long kept = engine.insert(JobRequest.of("rogue", "kept")).block();
        assertThat(engines.awaitSettled(engine, kept, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(effects(kept)).containsExactly(1);
        Connection escaped = leaked.get();
        assertThatThrownBy(() -> escaped.createStatement("SELECT 1"))
                .isInstanceOf(StepTransactionException.class).hasMessageContaining("after its handler ended");
        assertThatThrownBy(() -> Mono.from(escaped.close()).block()).isInstanceOf(StepTransactionException.class);
    }

    @Test
    void aHandlerThatSwallowsAFailedStatementOrReturnsWhatCannotBeStoredFailsWithItsWritesRolledBack() {
        DurableEngine[] engine = new DurableEngine[1];
        JobDefinition<String, String> careless = JobDefinition.transactional("careless", String.class,
                (String what, JobContext context, Connection transaction) -> {
                    Mono<Void> write = effect(transaction, db.schema(), context.id(), context.attempt(), what);
                    return switch (what) {
                        // A statement fails and the handler carries on: the transaction is aborted.
                        case "swallows" -> write.then(Mono.from(transaction.createStatement("SELECT 1 / 0").execute())
                                        .flatMap(result -> Mono.from(result.getRowsUpdated())).then())
                                .onErrorResume(error -> Mono.empty()).thenReturn("carried on");
                        // A result past the payload bound cannot be stored.
                        case "too large" -> write.thenReturn("x".repeat(4096));
                        // Completing its own run on its own transaction.
                        default -> write.then(engine[0].complete(transaction, context.claim(), "x")).thenReturn("y");
                    };
                })
                .queue("tx-careless");
        engine[0] = engines.start(engines.options("tx-careless").maxPayloadBytes(1024)
                .queue(queue("tx-careless", 2)), careless);

        long swallows = engine[0].insert(JobRequest.of("careless", "swallows")).block();
        Instance aborted = engines.awaitSettled(engine[0], swallows, WAIT);
        assertThat(aborted.status()).as("a mistake: failed at once").isEqualTo(InstanceStatus.FAILED);
        assertThat(aborted.attempt()).isEqualTo(1);
        assertThat(aborted.lastError()).contains(StepTransactionException.class.getName())
                .contains("the handler carried on");
        assertThat(effects(swallows)).isEmpty();

        long tooLarge = engine[0].insert(JobRequest.of("careless", "too large")).block();
        Instance unstorable = engines.awaitSettled(engine[0], tooLarge, WAIT);
        assertThat(unstorable.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(unstorable.attempt()).isEqualTo(1);
        assertThat(effects(tooLarge)).as("a failed job keeps no effect").isEmpty();

        long own = engine[0].insert(JobRequest.of("careless", "completes itself")).block();
        Instance completesItself = engines.awaitSettled(engine[0], own, WAIT);
        assertThat(completesItself.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(completesItself.lastError()).contains("a transactional handler's outcome is what it returns");
        assertThat(effects(own)).isEmpty();
    }

    @Test
    void aSlowTransactionalRunHoldsNoOtherOutcomeBackAndTheirNumberIsBounded() {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger holding = new AtomicInteger();
        AtomicInteger mostHolding = new AtomicInteger();
        JobDefinition<String, String> slow = JobDefinition.transactional("slow", String.class,
                (String what, JobContext context, Connection transaction) ->
                        effect(transaction, db.schema(), context.id(), context.attempt(), what)
                                .then(Mono.fromRunnable(() -> mostHolding.accumulateAndGet(holding.incrementAndGet(),
                                        Math::max)))
                                .then(gate.asMono())
                                // Before the run's end reaches the engine (doFinally would run after it: on
                                // a loaded machine the engine had committed and started the next run by then).
                                .doOnTerminate(holding::decrementAndGet)
                                .doOnCancel(holding::decrementAndGet)
                                .thenReturn("slow " + what))
                .queue("tx-mixed");
        JobDefinition<String, String> quick = JobDefinition.of("quick", String.class, (String s) -> Mono.just(s))
                .queue("tx-mixed");
        DurableEngine engine = engines.start(engines.options("tx-mixed").transactionalConcurrency(2)
                .queue(queue("tx-mixed", 16)), slow, quick);

        settleFifty(engine, "warm-up");
        long idle = settleFifty(engine, "idle");
        List<Long> slowIds = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            slowIds.add(engine.insert(JobRequest.of("slow", "s" + i)).block());
        }
        Eventually.until("two transactional runs hold their connections", WAIT, () -> holding.get() == 2);
        // Plain outcomes commit while the transactional runs sit in their transactions (and three more wait).
        long held = settleFifty(engine, "held");
        assertThat(holding.get()).as("the slow runs still hold").isEqualTo(2);
        // Printed, not asserted (speed belongs in benchmarks): the plain batch's time beside the idle one's.
        System.out.println("TX_HOSTAGE fifty plain jobs settled in " + idle + " ms idle, " + held
                + " ms beside two transactional runs holding their transactions open");

        gate.tryEmitEmpty();
        for (long id : slowIds) {
            assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(effects(id)).containsExactly(1);
        }
        assertThat(mostHolding.get()).as("at most transactionalConcurrency at once").isEqualTo(2);
    }

    /** Inserts fifty plain jobs at once and waits for each to be done; the milliseconds that took. */
    private long settleFifty(DurableEngine engine, String batch) {
        List<JobRequest> quickOnes = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            quickOnes.add(JobRequest.of("quick", batch + i));
        }
        long started = System.nanoTime();
        List<Instance> settled = Flux.fromIterable(engine.insertAll(quickOnes).block())
                .flatMap(id -> engine.awaitSettled(id, WAIT)).collectList().block();
        assertThat(settled).extracting(Instance::status).containsOnly(InstanceStatus.DONE);
        return Duration.ofNanos(System.nanoTime() - started).toMillis();
    }

    @Test
    void aPoolTooSmallForTransactionalRunsIsRefusedAtBuild() {
        JobDefinition<String, String> tx = JobDefinition.transactional("tx", String.class,
                (String s, JobContext context, Connection transaction) -> Mono.just(s)).queue("small");
        assertThatThrownBy(() -> engines.build(db.engineOptions().url(db.url()).name("small").poolMaxSize(6)
                        .queue(queue("small", 2)), tx))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("poolMaxSize must be at least the number of queues plus commitParallelism plus"
                        + " one plus transactionalConcurrency when a transactional type is registered (8 for 1 queues");
        assertThatThrownBy(() -> JobDefinition.transactional("tx", String.class, null))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
