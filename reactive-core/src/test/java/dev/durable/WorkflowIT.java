package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

@ExtendWith(PostgresExtension.class)
class WorkflowIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private EngineOptions.Builder options(String name, String queue) {
        return engines.options(name).queue(QueueOptions.builder(queue).concurrency(8)
                .pollInterval(Duration.ofMillis(100)).maxPollInterval(Duration.ofMillis(500)).build());
    }

    // ---- An order: await payment, fan out shipments, join ----------------------------------

    public record Order(String id, List<String> items, long paidCents) {
    }

    public record Payment(long cents) {
    }

    static JobDefinition<String, String> shipJob(String queue) {
        return JobDefinition.of("ship", String.class, (String item) -> Mono.just("shipped " + item)).queue(queue);
    }

    static WorkflowDefinition<Order> orderWorkflow(String queue) {
        return WorkflowDefinition.builder("order", Order.class)
                .queue(queue)
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("paid"), "ship", ctx.state(), Duration.ofMinutes(5))))
                .step("ship", ctx -> {
                    Signal paid = ctx.signal("paid");
                    if (paid == null) {
                        return Mono.just(Outcome.fail("not paid in time"));
                    }
                    Order order = ctx.state();
                    Order paidOrder = new Order(order.id(), order.items(), ctx.payload(paid, Payment.class).cents());
                    List<JobRequest> shipments = new ArrayList<>();
                    for (String item : order.items()) {
                        shipments.add(JobRequest.of("ship", item));
                    }
                    return Mono.just(Outcome.spawnChildren(shipments, "shipped", paidOrder));
                })
                .step("shipped", ctx -> Mono.just(Outcome.done(
                        ctx.children().stream().map(child -> ctx.result(child, String.class)).sorted().toList())))
                .build();
    }

    @Test
    void anOrderAwaitsItsPaymentThenFansOutShipmentsAndJoins() {
        DurableEngine engine = engines.start(options("shop", "orders"), orderWorkflow("orders"), shipJob("orders"));
        long id = engine.insert(JobRequest.of("order", new Order("o-1", List.of("book", "lamp", "mug"), 0))
                .correlationKey("order:o-1")).block();
        Instance parked = engine.awaitSettledOrParked(id, WAIT).block();
        assertThat(parked.status()).isEqualTo(InstanceStatus.AWAITING_SIGNAL);
        assertThat(parked.awaitedSignals()).containsExactly("paid");
        assertThat(parked.awaitDeadline()).isNotNull();

        assertThat(engine.signal("order:o-1", "paid", new Payment(4200), "payment-77").block())
                .isEqualTo(SignalResult.DELIVERED);
        assertThat(engine.signal("order:o-1", "paid", new Payment(4200), "payment-77").block())
                .isEqualTo(SignalResult.DUPLICATE);

        Instance done = engine.awaitSettled(id, WAIT).block();
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(engine.codec().decode(done.resultJson(), String[].class))
                .containsExactly("shipped book", "shipped lamp", "shipped mug");
        assertThat(engine.codec().decode(done.stateJson(), Order.class).paidCents()).isEqualTo(4200);
        assertThat(done.childrenPending()).isZero();
        assertThat(Sql.count(db, "parent_id = " + id + " AND status = 'done'")).isEqualTo(3);
        // The consumed signal left the inbox with the step that used it.
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals WHERE instance_id = $1"
                + " AND consumed_at IS NULL", row -> row.get(0, Long.class), id)).containsExactly(0L);
        // The key is free again once the order settled: signals to it go nowhere.
        assertThatThrownBy(() -> engine.signal("order:o-1", "paid", null, null).block())
                .isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> engine.signal(Long.MAX_VALUE, "paid", null, null).block())
                .isInstanceOf(NoTargetException.class);
    }

    @Test
    void aSignalThatLandsWhileTheParkingStepRunsWakesItOnCommit() {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger running = new AtomicInteger();
        WorkflowDefinition<String> racy = WorkflowDefinition.builder("racy", String.class).queue("race")
                .step("park", ctx -> Mono.defer(() -> {
                    running.incrementAndGet();
                    return gate.asMono().thenReturn(Outcome.await(Set.of("go"), "woken", ctx.state()));
                }))
                .step("woken", ctx -> Mono.just(Outcome.done(ctx.signals().size())))
                .build();
        DurableEngine engine = engines.start(options("racer", "race"), racy);
        long id = engine.insert(JobRequest.of("racy", "s")).block();
        Eventually.until("parking step running", WAIT, () -> running.get() == 1);

        // Delivered while the step runs: stored, nobody awaits it yet.
        assertThat(engine.signal(id, "go", "now", null).block()).isEqualTo(SignalResult.DELIVERED);
        gate.tryEmitEmpty();

        Instance done = engine.awaitSettled(id, WAIT).block();
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("1");
    }

    @Test
    void aSignalThatWaitsForTheParkingCommitWakesTheParkedRow() throws Exception {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger running = new AtomicInteger();
        WorkflowDefinition<String> racy = WorkflowDefinition.builder("held", String.class).queue("held")
                .step("park", ctx -> Mono.defer(() -> {
                    running.incrementAndGet();
                    return gate.asMono().thenReturn(Outcome.await(Set.of("go"), "woken", ctx.state()));
                }))
                .step("woken", ctx -> Mono.just(Outcome.done(ctx.signals().size())))
                .build();
        DurableEngine engine = engines.start(options("holder", "held"), racy);
        long id = engine.insert(JobRequest.of("held", "s")).block(WAIT);
        Eventually.until("parking step running", WAIT, () -> running.get() == 1);

        // A parking commit that has updated the executing row but not committed yet (as another
        // node's would be): the delivery's snapshot still sees the row executing, and it waits for
        // the lock, then finds the row parked on its signal.
        Connection parking = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Mono.from(parking.beginTransaction()).block(WAIT);
            Flux.from(parking.createStatement("UPDATE " + db.schema() + ".durable_instances"
                            + " SET status = 'awaiting_signal', step = 'woken', awaited_signals = '{go}',"
                            + " claimed_by = NULL, lease_expires_at = NULL WHERE id = " + id).execute())
                    .concatMap(Result::getRowsUpdated).blockLast(WAIT);
            CompletableFuture<SignalResult> delivery = engine.signal(id, "go", null, null).toFuture();
            Eventually.until("the delivery waits for the parking commit", WAIT, () -> !Sql.query(db,
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH target%'",
                    row -> 1).isEmpty());
            Mono.from(parking.commitTransaction()).block(WAIT);
            assertThat(delivery.get(1, TimeUnit.MINUTES)).isEqualTo(SignalResult.DELIVERED);
        } finally {
            Mono.from(parking.close()).block(WAIT);
        }
        // The first run's own commit is stale now (its claim is gone); the woken row runs on.
        gate.tryEmitEmpty();
        Instance done = engine.awaitSettled(id, WAIT).block(WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("1");
    }

    @Test
    void aSettledInstanceTakesItsInboxWithItAndRefusesLateSignals() {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger running = new AtomicInteger();
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("inboxed", String.class).queue("inboxed")
                .step("wait", ctx -> Mono.just(Outcome.await(Set.of("go"), "work", ctx.state())))
                .step("work", ctx -> Mono.defer(() -> {
                    running.incrementAndGet();
                    return gate.asMono().thenReturn(Outcome.done(ctx.signals().size()));
                }))
                .build();
        DurableEngine engine = engines.start(options("inboxer", "inboxed"), flow);
        long id = engine.insert(JobRequest.of("inboxed", "s")).block(WAIT);
        engines.awaitStatus(engine, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        assertThat(engine.signal(id, "go", null, "go-1").block(WAIT)).isEqualTo(SignalResult.DELIVERED);
        Eventually.until("the last step running", WAIT, () -> running.get() == 1);
        // Signals nobody awaits any more land in the inbox while the last step runs.
        assertThat(engine.signal(id, "noise", null, "noise-1").block(WAIT)).isEqualTo(SignalResult.DELIVERED);
        assertThat(engine.signal(id, "noise", null, "noise-2").block(WAIT)).isEqualTo(SignalResult.DELIVERED);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals WHERE instance_id = $1",
                row -> row.get(0, Long.class), id)).containsExactly(3L);
        gate.tryEmitEmpty();
        assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);

        // The settling commit took the whole inbox with it; what it consumed is named in the history.
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals WHERE instance_id = $1",
                row -> row.get(0, Long.class), id)).containsExactly(0L);
        assertThat(Sql.query(db, "SELECT array_to_string(signals, ',') FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, String.class), id)).containsExactly("go");
        // A late signal, new or a redelivery of one it had, finds no target.
        assertThatThrownBy(() -> engine.signal(id, "noise", null, "noise-3").block(WAIT))
                .isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> engine.signal(id, "go", null, "go-1").block(WAIT))
                .isInstanceOf(NoTargetException.class);
    }

    @Test
    void aSignalDeliveredWhileItsInstanceSettlesLeavesWithIt() throws Exception {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger running = new AtomicInteger();
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("settling", String.class).queue("settling")
                .step("work", ctx -> Mono.defer(() -> {
                    running.incrementAndGet();
                    return gate.asMono().thenReturn(Outcome.done(ctx.state()));
                }))
                .build();
        DurableEngine engine = engines.start(options("settler", "settling"), flow);
        long id = engine.insert(JobRequest.of("settling", "s")).block(WAIT);
        Eventually.until("the step running", WAIT, () -> running.get() == 1);

        // A delivery (as another node's, or the delivery statement itself) that has stored its signal
        // under the row's lock but not committed: the settling commit takes its snapshot now, waits for
        // the lock, and moves the row once the delivery commits. The signal committed after the
        // settle's snapshot was taken must leave with the row all the same.
        Connection delivering = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Mono.from(delivering.beginTransaction()).block(WAIT);
            for (String statement : List.of(
                    "SELECT id FROM " + db.schema() + ".durable_instances WHERE id = " + id + " FOR UPDATE",
                    "INSERT INTO " + db.schema() + ".durable_signals (instance_id, name) VALUES (" + id + ", 'late')",
                    "UPDATE " + db.schema() + ".durable_instances SET has_signals = true WHERE id = " + id)) {
                Flux.from(delivering.createStatement(statement).execute()).concatMap(Result::getRowsUpdated)
                        .blockLast(WAIT);
            }
            gate.tryEmitEmpty();
            Eventually.until("the settling commit waits for the delivery", WAIT, () -> !Sql.query(db,
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
                            + " AND query LIKE 'WITH moved AS%' AND query LIKE '%' || $1 || '%'",
                    row -> 1, db.schema()).isEmpty());
            Mono.from(delivering.commitTransaction()).block(WAIT);
        } finally {
            Mono.from(delivering.close()).block(WAIT);
        }
        assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals WHERE instance_id = $1",
                row -> row.get(0, Long.class), id)).as("signals left behind").containsExactly(0L);
    }

    @Test
    void aDedupKeyRefusesRedeliveryAfterTheSignalWasConsumed() {
        WorkflowDefinition<String> twoStage = WorkflowDefinition.builder("two-stage", String.class).queue("dedup")
                .step("first", ctx -> Mono.just(Outcome.await(Set.of("a"), "second", ctx.state())))
                .step("second", ctx -> Mono.just(Outcome.await(Set.of("a", "b"), "third", ctx.state())))
                .step("third", ctx -> Mono.just(Outcome.done(ctx.signals().stream().map(Signal::name).toList())))
                .build();
        DurableEngine engine = engines.start(options("deduper", "dedup"), twoStage);
        long id = engine.insert(JobRequest.of("two-stage", "s")).block();
        engine.awaitSettledOrParked(id, WAIT).block();
        assertThat(engine.signal(id, "a", 1, "a-1").block()).isEqualTo(SignalResult.DELIVERED);
        Eventually.until("parked in the second stage", WAIT, () -> "third".equals(engine.get(id).block().step()));
        // "a" with the same key again: consumed already, still refused, and it wakes nothing.
        assertThat(engine.signal(id, "a", 1, "a-1").block()).isEqualTo(SignalResult.DUPLICATE);
        assertThat(engine.get(id).block().status()).isEqualTo(InstanceStatus.AWAITING_SIGNAL);
        assertThat(engine.signal(id, "b", 2, "b-1").block()).isEqualTo(SignalResult.DELIVERED);
        assertThat(engine.awaitSettled(id, WAIT).block().resultJson()).isEqualTo("[\"b\"]");
    }

    @Test
    void anAwaitPastItsDeadlineResumesWithNoSignal() {
        WorkflowDefinition<String> patient = WorkflowDefinition.builder("patient", String.class).queue("deadline")
                .step("wait", ctx -> Mono.just(Outcome.await(Set.of("never"), "after", ctx.state(), Duration.ofMillis(300))))
                .step("after", ctx -> Mono.just(Outcome.done(ctx.awaitTimedOut() ? "timed out" : "signalled")))
                .build();
        DurableEngine engine = engines.start(options("patient", "deadline"), patient);
        long id = engine.insert(JobRequest.of("patient", "s")).block();
        Instance done = engine.awaitSettled(id, WAIT).block();
        assertThat(done.resultJson()).isEqualTo("\"timed out\"");
    }

    @Test
    void nestedFanOutJoinsAtEveryLevelAndAJoinSeesFailedChildren() {
        WorkflowDefinition<Integer> inner = WorkflowDefinition.builder("inner", Integer.class).queue("nest")
                .step("fan", ctx -> Mono.just(Outcome.spawnChildren(List.of(
                        JobRequest.of("leaf", ctx.state()), JobRequest.of("leaf", ctx.state() + 100)), "join", ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done(ctx.children().stream()
                        .mapToInt(child -> ctx.result(child, Integer.class)).sum())))
                .build();
        JobDefinition<Integer, Integer> leaf = JobDefinition.of("leaf", Integer.class, (Integer n) -> Mono.just(n * 2))
                .queue("nest");
        JobDefinition<Integer, Integer> broken = JobDefinition.of("broken", Integer.class,
                (Integer n) -> Mono.<Integer>error(new PermanentFailureException("no stock"))).queue("nest");
        WorkflowDefinition<String> outer = WorkflowDefinition.builder("outer", String.class).queue("nest")
                .step("fan", ctx -> Mono.just(Outcome.spawnChildren(List.of(JobRequest.of("inner", 1),
                        JobRequest.of("inner", 2), JobRequest.of("broken", 0)), "join", ctx.state())))
                .step("join", ctx -> {
                    int sum = 0;
                    List<String> failures = new ArrayList<>();
                    for (Child child : ctx.children()) {
                        if (child.status() == InstanceStatus.DONE) {
                            sum += ctx.result(child, Integer.class);
                        } else {
                            failures.add(child.type() + ":" + child.status() + ":" + child.lastError());
                        }
                    }
                    return Mono.just(Outcome.done(sum + " " + failures));
                })
                .build();
        DurableEngine engine = engines.start(options("nester", "nest"), inner, leaf, broken, outer);
        long id = engine.insert(JobRequest.of("outer", "go")).block();
        Instance done = engine.awaitSettled(id, WAIT).block();
        // inner(1) = 2 + 202, inner(2) = 4 + 204
        assertThat(engine.codec().decode(done.resultJson(), String.class))
                .isEqualTo("412 [broken:FAILED:dev.durable.PermanentFailureException: no stock]");
    }

    @Test
    void inlineStepsRunOnOneClaimAndSwapTheirConcurrencyKey() {
        Sinks.Empty<Void> holdB = Sinks.empty();
        AtomicInteger inB = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("chain", String.class).queue("inline")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline().concurrencyKey("k2")))
                .step("b", ctx -> Mono.defer(() -> {
                    inB.incrementAndGet();
                    return holdB.asMono().thenReturn(Outcome.next("c", ctx.state() + "b").inline().releaseConcurrencyKey());
                }))
                .step("c", ctx -> Mono.just(Outcome.done(ctx.state() + "c")))
                .build();
        JobDefinition<String, String> keyed = JobDefinition.of("keyed", String.class, (String s) -> Mono.just(s))
                .queue("inline");
        DurableEngine engine = engines.start(options("inliner", "inline"), chain, keyed);
        long id = engine.insert(JobRequest.of("chain", "").concurrencyKey("k1")).block();
        Eventually.until("in step b", WAIT, () -> inB.get() == 1);
        Instance inStepB = engine.get(id).block();
        assertThat(inStepB.status()).isEqualTo(InstanceStatus.EXECUTING);
        assertThat(inStepB.step()).isEqualTo("b");
        assertThat(inStepB.concurrencyKey()).isEqualTo("k2");
        assertThat(inStepB.attempt()).isEqualTo(1);
        // k2 is held by the running chain: a job with that key waits; k1 was given up.
        long blocked = engine.insert(JobRequest.of("keyed", "x").concurrencyKey("k2")).block();
        long free = engine.insert(JobRequest.of("keyed", "y").concurrencyKey("k1")).block();
        engines.awaitStatus(engine, free, InstanceStatus.DONE, WAIT);
        // Longer than the 3 s lease: the heartbeat renews the claim of the inline step.
        Eventually.sleep(3500);
        assertThat(engine.get(blocked).block().status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(engine.get(id).block().claimedBy()).isEqualTo(inStepB.claimedBy());
        holdB.tryEmitEmpty();
        Instance done = engine.awaitSettled(id, WAIT).block();
        assertThat(done.resultJson()).isEqualTo("\"abc\"");
        assertThat(done.concurrencyKey()).isNull();
        assertThat(engine.queueStats().get(0).picked()).isLessThanOrEqualTo(3); // chain, free, blocked
        engines.awaitStatus(engine, blocked, InstanceStatus.DONE, WAIT);
    }

    @Test
    void anInlineStepWhoseNewKeyIsBusyGoesBackThroughTheQueue() {
        SchedulerIT.GatedJob holder = new SchedulerIT.GatedJob();
        WorkflowDefinition<String> swapper = WorkflowDefinition.builder("swapper", String.class).queue("swap")
                .step("a", ctx -> Mono.just(Outcome.next("b", "from-a").inline().concurrencyKey("busy")))
                .step("b", ctx -> Mono.just(Outcome.done(ctx.state())))
                .build();
        DurableEngine engine = engines.start(options("swapper", "swap"), swapper, holder.definition("holder", "swap"));
        engine.insert(JobRequest.of("holder", "h").concurrencyKey("busy")).block();
        Eventually.until("holder runs", WAIT, () -> holder.started.get() == 1);
        long id = engine.insert(JobRequest.of("swapper", "s")).block();
        Instance waiting = Eventually.until("back in the queue", WAIT, () -> engine.get(id).block(),
                i -> i.status() == InstanceStatus.RUNNABLE && "b".equals(i.step()));
        assertThat(waiting.concurrencyKey()).isEqualTo("busy");
        holder.open();
        assertThat(engine.awaitSettled(id, WAIT).block().resultJson()).isEqualTo("\"from-a\"");
    }

    @Test
    void cancellingParkedExecutingAndWholeFamilies() {
        Sinks.Empty<Void> gate = Sinks.empty();
        AtomicInteger started = new AtomicInteger();
        WorkflowDefinition<String> slow = WorkflowDefinition.builder("slow", String.class).queue("cancel")
                .step("work", ctx -> Mono.defer(() -> {
                    started.incrementAndGet();
                    return gate.asMono().thenReturn(Outcome.next("more", "changed"));
                }))
                .step("more", ctx -> Mono.just(Outcome.done("should not run")))
                .build();
        WorkflowDefinition<String> parent = WorkflowDefinition.builder("parent", String.class).queue("cancel")
                .step("fan", ctx -> Mono.just(Outcome.spawnChildren(List.of(JobRequest.of("parked", "c1"),
                        JobRequest.of("parked", "c2")), "join", ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done("joined")))
                .build();
        WorkflowDefinition<String> parked = WorkflowDefinition.builder("parked", String.class).queue("cancel")
                .step("wait", ctx -> Mono.just(Outcome.await(Set.of("never"), "end", ctx.state())))
                .step("end", ctx -> Mono.just(Outcome.done("end")))
                .build();
        DurableEngine engine = engines.start(options("canceller", "cancel"), slow, parent, parked);

        long lone = engine.insert(JobRequest.of("parked", "alone")).block();
        engine.awaitSettledOrParked(lone, WAIT).block();
        assertThat(engine.cancel(lone).block()).isEqualTo(CancelResult.CANCELLED);

        long running = engine.insert(JobRequest.of("slow", "original")).block();
        Eventually.until("running", WAIT, () -> started.get() == 1);
        assertThat(engine.cancel(running).block()).isEqualTo(CancelResult.REQUESTED);
        gate.tryEmitEmpty();
        Instance cancelled = engine.awaitSettled(running, WAIT).block();
        assertThat(cancelled.status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(cancelled.step()).isEqualTo("work");
        assertThat(engine.codec().decode(cancelled.stateJson(), String.class)).isEqualTo("original");

        long family = engine.insert(JobRequest.of("parent", "p")).block();
        Eventually.until("children parked", WAIT,
                () -> Sql.count(db, "parent_id = " + family + " AND status = 'awaiting_signal'") == 2);
        assertThat(engine.cancel(family, true).block()).isEqualTo(CancelResult.CANCELLED);
        assertThat(Sql.count(db, "parent_id = " + family + " AND status = 'cancelled'")).isEqualTo(2);
        assertThat(engine.get(family).block().status()).isEqualTo(InstanceStatus.CANCELLED);
    }

    @Test
    void callersAwaitSettlementWithATimeout() {
        WorkflowDefinition<String> never = WorkflowDefinition.builder("idle", String.class).queue("await")
                .step("wait", ctx -> Mono.just(Outcome.await(Set.of("never"), "end", ctx.state())))
                .step("end", ctx -> Mono.just(Outcome.done("end")))
                .build();
        DurableEngine engine = engines.start(options("awaiter", "await"), never);
        long id = engine.insert(JobRequest.of("idle", "x")).block();
        assertThatThrownBy(() -> engine.awaitSettled(id, Duration.ofMillis(500)).block())
                .isInstanceOf(DurableTimeoutException.class);
        assertThatThrownBy(() -> engine.awaitSettled(Long.MAX_VALUE, Duration.ofSeconds(5)).block())
                .isInstanceOf(NoTargetException.class);
        engine.signal(id, "never", null, null).block();
        assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void aNewEngineResumesAnInstanceFromItsCommittedState() {
        AtomicInteger firstSteps = new AtomicInteger();
        WorkflowDefinition<Integer> counter = WorkflowDefinition.builder("counter", Integer.class).queue("resume")
                .step("one", ctx -> {
                    firstSteps.incrementAndGet();
                    return Mono.just(Outcome.next("two", ctx.state() + 1).after(Duration.ofSeconds(2)));
                })
                .step("two", ctx -> Mono.just(Outcome.done(ctx.state() * 10)))
                .build();
        DurableEngine first = engines.start(options("first", "resume"), counter);
        long id = first.insert(JobRequest.of("counter", 4)).block();
        Eventually.until("step one committed", WAIT, () -> "two".equals(first.get(id).block().step()));
        first.closeLater().block();

        DurableEngine second = engines.start(options("second", "resume"), counter);
        Instance done = second.awaitSettled(id, WAIT).block();
        assertThat(done.resultJson()).isEqualTo("50");
        assertThat(firstSteps.get()).isEqualTo(1);
    }

    @Test
    void retryRunsTheStepAgainWithoutSpendingAnAttemptAndUnknownStepsWaitForAnEngineThatKnowsThem() {
        AtomicInteger polls = new AtomicInteger();
        WorkflowDefinition<String> poller = WorkflowDefinition.builder("poller", String.class).queue("steps")
                .maxAttempts(1)
                .step("poll", ctx -> Mono.just(polls.incrementAndGet() < 3
                        ? Outcome.<String>retry(Duration.ofMillis(20)) : Outcome.<String>done(polls.get())))
                .build();
        DurableEngine engine = engines.start(options("stepper", "steps"), poller);
        long id = engine.insert(JobRequest.of("poller", "x")).block();
        assertThat(engine.awaitSettled(id, WAIT).block().resultJson()).isEqualTo("3");

        // A step this engine does not have (a newer release added it): handed back unrun, unpaid.
        long newer = engine.insert(JobRequest.of("poller", "y").runIn(Duration.ofHours(1))).block();
        Sql.update(db, "UPDATE {schema}.durable_instances SET step = 'added-step', eligible_at = now() WHERE id = $1",
                newer);
        Instance handedBack = Eventually.until("handed back", WAIT, () -> engine.get(newer).block(),
                instance -> instance.lastError() != null);
        assertThat(handedBack.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(handedBack.attempt()).isZero();
        assertThat(handedBack.lastError()).startsWith("step 'added-step' of workflow poller")
                .contains("left for an engine that knows it");
        assertThat(handedBack.eligibleAt()).isAfter(handedBack.updatedAt());
        // The newer release's engine runs it, with its whole attempt budget (max 1 here).
        WorkflowDefinition<String> newerPoller = WorkflowDefinition.builder("poller", String.class).queue("steps")
                .maxAttempts(1)
                .step("poll", ctx -> Mono.just(Outcome.<String>done("old")))
                .step("added-step", ctx -> Mono.just(Outcome.<String>done("new")))
                .build();
        engines.start(options("newer", "steps"), newerPoller);
        Instance done = engine.awaitSettled(newer, WAIT).block();
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"new\"");
    }
}
