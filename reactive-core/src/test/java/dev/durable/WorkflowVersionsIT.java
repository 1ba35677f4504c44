package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.admin.BulkProgress;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.PageRequest;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Versioned workflows on the real database: an instance parked at v1 resumes on a v2 node through its
 * state migration, a v1 node never claims a v2 instance, instances with no migration path wait visibly
 * until failed on purpose, bulk migration, and a migration that fails leaves its row as it was.
 */
@ExtendWith(PostgresExtension.class)
class WorkflowVersionsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final Backoff FAST = Backoff.fixed(Duration.ofMillis(20));

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    record OrderV1(String id, long cents) {
    }

    record Order(String id, long cents, String currency) {
    }

    /** v1: waits for "paid", then charges. */
    private static WorkflowDefinition<OrderV1> v1(String type, String queue) {
        return WorkflowDefinition.builder(type, OrderV1.class).queue(queue).backoff(FAST)
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("paid"), "charge", ctx.state())))
                .step("charge", ctx -> Mono.just(Outcome.done("v1:" + ctx.state().cents())))
                .build();
    }

    /** v2: "charge" is renamed "pay", the state gained a currency (EUR for older orders). */
    private static WorkflowDefinition<Order> v2(String type, String queue) {
        return WorkflowDefinition.builder(type, Order.class).queue(queue).version(2).backoff(FAST)
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("paid"), "pay", ctx.state())))
                .step("pay", ctx -> Mono.just(Outcome.done("v2:" + ctx.state().cents() + " " + ctx.state().currency()
                        + " signals=" + ctx.signals().size())))
                .migration(StateMigration.from(1)
                        .state(OrderV1.class, old -> new Order(old.id(), old.cents(), "EUR"))
                        .mapStep("charge", "pay"))
                .build();
    }

    private EngineOptions.Builder serving(String name, String... queues) {
        EngineOptions.Builder options = engines.options(name);
        for (String queue : queues) {
            options.queue(QueueOptions.builder(queue).concurrency(2).pollInterval(Duration.ofMillis(50))
                    .maxPollInterval(Duration.ofMillis(200)).build());
        }
        return options;
    }

    @Test
    void aWorkflowParkedAtV1ResumesOnAV2NodeWithTheRenamedStepAndTheNewStateField() {
        DurableEngine oldNode = engines.start(serving("v1-node", "ver-park"), v1("order", "ver-park"));
        long id = oldNode.insert(JobRequest.of("order", new OrderV1("o-1", 1200))).block(WAIT);
        Instance parked = engines.awaitStatus(oldNode, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        assertThat(parked.typeVersion()).isEqualTo(1);
        assertThat(parked.step()).isEqualTo("charge");
        oldNode.closeLater().block(WAIT);

        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine newNode = engines.start(serving("v2-node", "ver-park").meterRegistry(meters), v2("order", "ver-park"));
        assertThat(newNode.signal(id, "paid", null, null).block(WAIT)).isNotNull();
        Instance done = engines.awaitStatus(newNode, id, InstanceStatus.DONE, WAIT);
        assertThat(meters.counter("durable.workflow.migrations", "type", "order", "from", "1", "outcome", "migrated")
                .count()).isEqualTo(1.0);
        assertThat(done.resultJson()).isEqualTo("\"v2:1200 EUR signals=1\"");
        assertThat(done.typeVersion()).isEqualTo(2);
        assertThat(done.step()).isEqualTo("pay");
        assertThat(newNode.codec().decode(done.stateJson(), Order.class)).isEqualTo(new Order("o-1", 1200, "EUR"));
        assertThat(done.attempt()).isEqualTo(1);
    }

    @Test
    void aReplayFromAStepRecordedBeforeAMigrationIsMigratedAgainWhenClaimed() {
        DurableEngine oldNode = engines.start(serving("v1-node", "ver-replay"), v1("order", "ver-replay"));
        long id = oldNode.insert(JobRequest.of("order", new OrderV1("o-2", 700))).block(WAIT);
        engines.awaitStatus(oldNode, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        oldNode.closeLater().block(WAIT);
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine newNode = engines.start(serving("v2-node", "ver-replay").meterRegistry(meters),
                v2("order", "ver-replay"));
        newNode.signal(id, "paid", null, null).block(WAIT);
        engines.awaitStatus(newNode, id, InstanceStatus.DONE, WAIT);

        // "start" ran under v1: its recorded input is v1's state, so the replay brings the row back at v1
        // and the claim migrates it again (the migration itself recorded no input).
        newNode.replay(id, "start").block(WAIT);
        Instance parked = engines.awaitStatus(newNode, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        assertThat(parked.typeVersion()).isEqualTo(2);
        assertThat(parked.step()).isEqualTo("pay");
        assertThat(newNode.codec().decode(parked.stateJson(), Order.class)).isEqualTo(new Order("o-2", 700, "EUR"));
        assertThat(meters.counter("durable.workflow.migrations", "type", "order", "from", "1", "outcome", "migrated")
                .count()).isEqualTo(2.0);

        // A given state is of the engine's version: it runs as it is, migrated by nothing.
        newNode.signal(id, "paid", null, null).block(WAIT);
        engines.awaitStatus(newNode, id, InstanceStatus.DONE, WAIT);
        newNode.replay(id, "start", new Order("o-2", 900, "USD")).block(WAIT);
        Instance given = engines.awaitStatus(newNode, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        assertThat(given.typeVersion()).isEqualTo(2);
        assertThat(newNode.codec().decode(given.stateJson(), Order.class)).isEqualTo(new Order("o-2", 900, "USD"));
        assertThat(meters.counter("durable.workflow.migrations", "type", "order", "from", "1", "outcome", "migrated")
                .count()).isEqualTo(2.0);
    }

    @Test
    void aV1NodeNeverClaimsAV2InstanceAndOldNodesKeepRunningOldOnes() {
        // Side by side: a v2 node inserts (and serves nothing yet), a v1 node serves the queue.
        DurableEngine newProducer = engines.start(engines.options("v2-producer"), v2("order2", "ver-side"));
        DurableEngine oldNode = engines.start(serving("v1-side", "ver-side"), v1("order2", "ver-side"));
        long newer = newProducer.insert(JobRequest.of("order2", new Order("n", 5, "USD"))).block(WAIT);
        long older = oldNode.insert(JobRequest.of("order2", new OrderV1("o", 7))).block(WAIT);

        // The old node runs the old instance as v1 ...
        engines.awaitStatus(oldNode, older, InstanceStatus.AWAITING_SIGNAL, WAIT);
        oldNode.signal(older, "paid", null, null).block(WAIT);
        assertThat(engines.awaitStatus(oldNode, older, InstanceStatus.DONE, WAIT).resultJson()).isEqualTo("\"v1:7\"");
        // ... and never touches the v2 one, however often it polls.
        Eventually.sleep(1000);
        Instance untouched = oldNode.get(newer).block(WAIT);
        assertThat(untouched.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(untouched.attempt()).isZero();
        assertThat(untouched.typeVersion()).isEqualTo(2);
        assertThat(untouched.claimedBy()).isNull();

        // A v2 node comes along and runs it.
        DurableEngine newNode = engines.start(serving("v2-side", "ver-side"), v2("order2", "ver-side"));
        engines.awaitStatus(newNode, newer, InstanceStatus.AWAITING_SIGNAL, WAIT);
        newNode.signal(newer, "paid", null, null).block(WAIT);
        assertThat(engines.awaitStatus(newNode, newer, InstanceStatus.DONE, WAIT).resultJson())
                .isEqualTo("\"v2:5 USD signals=1\"");
    }

    @Test
    void aStepTheChainMapsNowhereIsHandedBackUnrunForANodeThatStillRunsItsVersion() {
        WorkflowDefinition<OrderV1> v1 = WorkflowDefinition.builder("notifier", OrderV1.class).queue("ver-step")
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("go"), "notify", ctx.state())))
                .step("notify", ctx -> Mono.just(Outcome.done("v1 notified " + ctx.state().id())))
                .build();
        // Version 2 dropped "notify" and its migration does not say where such instances go.
        WorkflowDefinition<Order> v2 = WorkflowDefinition.builder("notifier", Order.class).queue("ver-step").version(2)
                .step("start", ctx -> Mono.just(Outcome.done("v2")))
                .migration(StateMigration.from(1).state(OrderV1.class, old -> new Order(old.id(), old.cents(), "EUR")))
                .build();
        DurableEngine oldNode = engines.start(serving("step-v1", "ver-step"), v1);
        long id = oldNode.insert(JobRequest.of("notifier", new OrderV1("x", 1))).block(WAIT);
        engines.awaitStatus(oldNode, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        oldNode.closeLater().block(WAIT);

        DurableEngine newNode = engines.start(serving("step-v2", "ver-step"), v2);
        newNode.signal(id, "go", null, null).block(WAIT);
        Instance handedBack = Eventually.until("handed back", WAIT, () -> newNode.get(id).block(WAIT),
                i -> i.lastError() != null);
        assertThat(handedBack.lastError()).contains("no migration path for step 'notify' of version 1");
        assertThat(handedBack.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(handedBack.typeVersion()).isEqualTo(1);
        assertThat(handedBack.step()).isEqualTo("notify");
        assertThat(handedBack.attempt()).isZero();
        newNode.closeLater().block(WAIT);

        DurableEngine oldAgain = engines.start(serving("step-v1-again", "ver-step"), v1);
        assertThat(engines.awaitStatus(oldAgain, id, InstanceStatus.DONE, WAIT).resultJson())
                .isEqualTo("\"v1 notified x\"");
    }

    /** v3 of "legacy" migrates from 2 only: version 1 has no path. */
    private static WorkflowDefinition<Order> v3FromTwo(String type, String queue) {
        return WorkflowDefinition.builder(type, Order.class).queue(queue).version(3).backoff(FAST)
                .step("start", ctx -> Mono.just(Outcome.done("v3:" + ctx.state().currency())))
                .migration(StateMigration.from(2)
                        .state(Order.class, old -> new Order(old.id(), old.cents(), old.currency().toLowerCase())))
                .build();
    }

    @Test
    void instancesWithNoMigrationPathStayVisibleUntilFailedOnPurpose() {
        DurableEngine oldProducer = engines.start(engines.options("legacy-producer"),
                WorkflowDefinition.builder("legacy", OrderV1.class).queue("ver-nopath")
                        .step("start", ctx -> Mono.just(Outcome.done("v1"))).build());
        DurableEngine v2Producer = engines.start(engines.options("legacy-v2-producer"),
                WorkflowDefinition.builder("legacy", Order.class).queue("ver-nopath").version(2)
                        .step("start", ctx -> Mono.just(Outcome.done("v2"))).build());
        long stranded = oldProducer.insert(JobRequest.of("legacy", new OrderV1("s", 1))).block(WAIT);
        long migratable = v2Producer.insert(JobRequest.of("legacy", new Order("m", 2, "EUR"))).block(WAIT);
        oldProducer.closeLater().block(WAIT);
        v2Producer.closeLater().block(WAIT);

        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine node = engines.start(serving("v3-node", "ver-nopath").meterRegistry(meters),
                v3FromTwo("legacy", "ver-nopath"));
        // The v2 instance is migrated at its claim and runs; the v1 one is never claimed.
        assertThat(engines.awaitStatus(node, migratable, InstanceStatus.DONE, WAIT).resultJson()).isEqualTo("\"v3:eur\"");
        Eventually.sleep(1000);
        Instance waiting = node.get(stranded).block(WAIT);
        assertThat(waiting.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(waiting.attempt()).isZero();
        assertThat(waiting.typeVersion()).isEqualTo(1);

        // Visible: unserved work (and its gauge), the admin listing by version.
        List<UnservedWork> unserved = node.unservedWork().filter(work -> work.queue().equals("ver-nopath"))
                .collectList().block(WAIT);
        assertThat(unserved).singleElement().satisfies(work -> {
            assertThat(work.type()).isEqualTo("legacy");
            assertThat(work.typeVersion()).isEqualTo(1);
            assertThat(work.reason()).isEqualTo(UnservedWork.Reason.NO_MIGRATION_PATH);
            assertThat(work.instances()).isEqualTo(1);
        });
        Eventually.until("the unserved gauge counts it", WAIT, () -> meters.find("durable.unserved")
                .tags("queue", "ver-nopath", "reason", "no_migration_path").gauge() != null
                && meters.find("durable.unserved").tags("queue", "ver-nopath", "reason", "no_migration_path")
                        .gauge().value() == 1.0);
        DurableAdmin admin = node.admin();
        assertThat(admin.list(InstanceFilter.builder().type("legacy").typeVersion(1).build(), PageRequest.oldestFirst(10))
                .block(WAIT).items()).extracting(Instance::id).containsExactly(stranded);
        assertThat(admin.list(InstanceFilter.builder().type("legacy").typeVersionBetween(2, null).build(),
                PageRequest.oldestFirst(10)).block(WAIT).items()).extracting(Instance::id).containsExactly(migratable);

        // Failing them is explicit and guarded: only versions with no path, only this type's.
        assertThatThrownBy(() -> admin.failUnmigratable("legacy", 2).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("only versions below 2");
        assertThatThrownBy(() -> admin.failUnmigratable("nobody", 1).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("does not know type 'nobody'");
        assertThat(admin.failUnmigratable("legacy", 1).block(WAIT)).isEqualTo(1);
        Instance failed = node.get(stranded).block(WAIT);
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.lastError()).contains("no migration path from version 1 to 3");
        assertThat(admin.failUnmigratable("legacy", 1).block(WAIT)).isZero();
    }

    /** The pick of an engine that knows limits (another statement) keeps to the same range. */
    @Test
    void theLimitedPickKeepsToTheVersionsItCanRunToo() {
        DurableEngine oldProducer = engines.start(engines.options("limited-v1-producer"),
                WorkflowDefinition.builder("limited", OrderV1.class).queue("ver-limited")
                        .step("start", ctx -> Mono.just(Outcome.done("v1"))).build());
        DurableEngine v2Producer = engines.start(engines.options("limited-v2-producer"),
                WorkflowDefinition.builder("limited", Order.class).queue("ver-limited").version(2)
                        .step("start", ctx -> Mono.just(Outcome.done("v2"))).build());
        long stranded = oldProducer.insert(JobRequest.of("limited", new OrderV1("s", 1))).block(WAIT);
        long migratable = v2Producer.insert(JobRequest.of("limited", new Order("m", 2, "USD"))).block(WAIT);
        long newer = engines.start(engines.options("limited-v4-producer"),
                        WorkflowDefinition.builder("limited", Order.class).queue("ver-limited").version(4)
                                .step("start", ctx -> Mono.just(Outcome.done("v4"))).build())
                .insert(JobRequest.of("limited", new Order("n", 3, "USD"))).block(WAIT);

        DurableEngine node = engines.start(serving("limited-v3", "ver-limited").gate("some-gate", 2),
                v3FromTwo("limited", "ver-limited"));
        assertThat(engines.awaitStatus(node, migratable, InstanceStatus.DONE, WAIT).resultJson()).isEqualTo("\"v3:usd\"");
        Eventually.sleep(1000);
        for (long untouched : List.of(stranded, newer)) {
            Instance waiting = node.get(untouched).block(WAIT);
            assertThat(waiting.status()).isEqualTo(InstanceStatus.RUNNABLE);
            assertThat(waiting.attempt()).isZero();
        }
    }

    @Test
    void aBulkMigrationMovesParkedInstancesToTheNewVersion() {
        DurableEngine oldNode = engines.start(serving("bulk-v1", "ver-bulk"), v1("bulky", "ver-bulk"));
        List<Long> ids = IntStream.range(0, 12)
                .mapToObj(i -> oldNode.insert(JobRequest.of("bulky", new OrderV1("b" + i, i))).block(WAIT)).toList();
        ids.forEach(id -> engines.awaitStatus(oldNode, id, InstanceStatus.AWAITING_SIGNAL, WAIT));
        oldNode.closeLater().block(WAIT);

        // The new node runs the bulk queue only: the instances stay parked while they migrate.
        DurableEngine newNode = engines.start(serving("bulk-v2", DurableAdmin.BULK_QUEUE), v2("bulky", "ver-bulk"));
        long job = newNode.admin().migrate("bulky").block(WAIT);
        BulkProgress progress = Eventually.until("bulk migration finished", WAIT,
                () -> newNode.admin().bulkProgress(job).block(WAIT), BulkProgress::finished);
        assertThat(progress.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(progress.total()).isEqualTo(12);
        assertThat(progress.affected()).isEqualTo(12);
        for (long id : ids) {
            Instance migrated = newNode.get(id).block(WAIT);
            assertThat(migrated.status()).isEqualTo(InstanceStatus.AWAITING_SIGNAL);
            assertThat(migrated.typeVersion()).isEqualTo(2);
            assertThat(migrated.step()).isEqualTo("pay");
            assertThat(newNode.codec().decode(migrated.stateJson(), Order.class).currency()).isEqualTo("EUR");
        }
        // Nothing left to migrate: a second job finds none.
        long again = newNode.admin().migrate("bulky").block(WAIT);
        assertThat(Eventually.until("second bulk migration finished", WAIT,
                () -> newNode.admin().bulkProgress(again).block(WAIT), BulkProgress::finished).affected()).isZero();
        assertThatThrownBy(() -> newNode.admin().migrate("ver-unknown").block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
    }

    @Test
    void aMigrationThatThrowsLeavesTheRowAsItWasAndFailsLikeAStep() {
        DurableEngine producer = engines.start(engines.options("throw-producer"), v1("fragile", "ver-throw"));
        long id = producer.insert(JobRequest.of("fragile", new OrderV1("f", 3)).maxAttempts(2)).block(WAIT);
        AtomicInteger tries = new AtomicInteger();
        WorkflowDefinition<Order> broken = WorkflowDefinition.builder("fragile", Order.class).queue("ver-throw")
                .version(2).backoff(FAST)
                .step("start", ctx -> Mono.just(Outcome.done("ran")))
                .migration(StateMigration.from(1).state(OrderV1.class, old -> {
                    tries.incrementAndGet();
                    throw new IllegalStateException("cannot price " + old.id());
                }))
                .build();
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine node = engines.start(serving("throw-node", "ver-throw").meterRegistry(meters), broken);
        Instance failed = engines.awaitStatus(node, id, InstanceStatus.FAILED, WAIT);
        assertThat(tries.get()).isEqualTo(2);
        assertThat(meters.counter("durable.workflow.migrations", "type", "fragile", "from", "1", "outcome", "failed")
                .count()).isEqualTo(2.0);
        assertThat(failed.attempt()).isEqualTo(2);
        assertThat(failed.lastError()).startsWith("migration of workflow fragile from version 1 to 2 failed:")
                .contains("cannot price f");
        // As it was: old version, old step, old state.
        assertThat(failed.typeVersion()).isEqualTo(1);
        assertThat(failed.step()).isEqualTo("start");
        assertThat(node.codec().decode(failed.stateJson(), OrderV1.class)).isEqualTo(new OrderV1("f", 3));
    }

    @Test
    void aMigrationThatHangsIsBoundedByTheTypesTimeout() {
        DurableEngine producer = engines.start(engines.options("hang-producer"), v1("hanging", "ver-hang"));
        long id = producer.insert(JobRequest.of("hanging", new OrderV1("h", 1)).maxAttempts(2)).block(WAIT);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        WorkflowDefinition<Order> hanging = WorkflowDefinition.builder("hanging", Order.class).queue("ver-hang")
                .version(2).backoff(FAST).timeout(Duration.ofMillis(300))
                .step("start", ctx -> Mono.just(Outcome.done("ran")))
                .migration(StateMigration.from(1).state(OrderV1.class, old -> {
                    try {
                        release.await();
                    } catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                    }
                    return new Order(old.id(), old.cents(), "EUR");
                }))
                .build();
        try {
            DurableEngine node = engines.start(serving("hang-node", "ver-hang"), hanging);
            Instance failed = engines.awaitStatus(node, id, InstanceStatus.FAILED, WAIT);
            assertThat(failed.lastError()).isEqualTo("migration of workflow hanging from version 1 to 2 timed out after PT0.3S");
            assertThat(failed.typeVersion()).isEqualTo(1);
        } finally {
            release.countDown();
        }
    }

    @Test
    void anEngineClosedWhileMigratingLeavesTheRowAsItWas() throws Exception {
        DurableEngine producer = engines.start(engines.options("slow-producer"), v1("slowmig", "ver-slow"));
        long id = producer.insert(JobRequest.of("slowmig", new OrderV1("s", 9))).block(WAIT);
        java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch never = new java.util.concurrent.CountDownLatch(1);
        WorkflowDefinition<Order> stuck = WorkflowDefinition.builder("slowmig", Order.class).queue("ver-slow")
                .version(2).backoff(FAST)
                .step("start", ctx -> Mono.just(Outcome.done("ran")))
                .migration(StateMigration.from(1).state(OrderV1.class, old -> {
                    entered.countDown();
                    try {
                        never.await();
                    } catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                    }
                    return new Order(old.id(), old.cents(), "EUR");
                }))
                .build();
        // Closing does not wait long for the stuck run: the lease lapses, as after a crash.
        DurableEngine dying = engines.start(engines.options("slow-node").queue(QueueOptions.builder("ver-slow")
                .pollInterval(Duration.ofMillis(50)).drainTimeout(Duration.ofMillis(200)).build()), stuck);
        assertThat(entered.await(WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        dying.closeLater().block(WAIT);
        Instance left = producer.get(id).block(WAIT);
        assertThat(left.typeVersion()).isEqualTo(1);
        assertThat(producer.codec().decode(left.stateJson(), OrderV1.class)).isEqualTo(new OrderV1("s", 9));
        never.countDown();

        // A healthy v2 node gets it once the lease lapses, and migrates it.
        DurableEngine healthy = engines.start(serving("healthy-node", "ver-slow"), v2ish("slowmig", "ver-slow"));
        Instance done = engines.awaitStatus(healthy, id, InstanceStatus.DONE, WAIT);
        assertThat(done.typeVersion()).isEqualTo(2);
        assertThat(done.resultJson()).isEqualTo("\"EUR\"");
    }

    @Test
    void theReadmeExample() {
        // tag::versioned-workflow[]
        record CheckoutV1(String orderId, long cents) {}                 // the state as version 1 stored it
        record Checkout(String orderId, long cents, String currency) {}

        WorkflowDefinition<Checkout> checkout = WorkflowDefinition.builder("checkout", Checkout.class)
                .queue("checkout")
                .version(2)                                             // new instances are stored as version 2
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("paid"), "capture", ctx.state())))
                .step("capture", ctx -> Mono.just(Outcome.done(ctx.state().cents() + " " + ctx.state().currency())))
                .migration(StateMigration.from(1)                       // how a version 1 instance becomes version 2
                        .state(CheckoutV1.class, old -> new Checkout(old.orderId(), old.cents(), "EUR"))
                        .mapStep("charge", "capture"))                  // version 1's "charge" is now "capture"
                .build();
        // end::versioned-workflow[]

        WorkflowDefinition<CheckoutV1> before = WorkflowDefinition.builder("checkout", CheckoutV1.class)
                .queue("checkout")
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("paid"), "charge", ctx.state())))
                .step("charge", ctx -> Mono.just(Outcome.done("v1")))
                .build();
        DurableEngine oldRelease = engines.start(serving("readme-v1", "checkout"), before);
        long id = oldRelease.insert(JobRequest.of("checkout", new CheckoutV1("o-42", 4200))).block(WAIT);
        engines.awaitStatus(oldRelease, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        oldRelease.closeLater().block(WAIT);

        DurableEngine newRelease = engines.start(serving("readme-v2", "checkout"), checkout);
        newRelease.signal(id, "paid", null, null).block(WAIT);
        assertThat(engines.awaitStatus(newRelease, id, InstanceStatus.DONE, WAIT).resultJson())
                .isEqualTo("\"4200 EUR\"");
    }

    /**
     * The other side of a crash: the migration committed, the step had not finished. The row stays at
     * the new version under the lapsed claim, and the next claim runs the step on the migrated state
     * without migrating again.
     */
    @Test
    void aNodeLostAfterTheMigrationCommittedLeavesTheRowMigratedAndItsStepRunsOnce() throws Exception {
        DurableEngine producer = engines.start(engines.options("lost-producer"), v1("lostmig", "ver-lost"));
        long id = producer.insert(JobRequest.of("lostmig", new OrderV1("l", 4))).block(WAIT);
        java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
        WorkflowDefinition<Order> hanging = WorkflowDefinition.builder("lostmig", Order.class).queue("ver-lost")
                .version(2).backoff(FAST)
                .step("start", ctx -> {
                    entered.countDown();
                    return Mono.never();
                })
                .migration(StateMigration.from(1).state(OrderV1.class, old -> new Order(old.id(), old.cents(), "EUR")))
                .build();
        DurableEngine dying = engines.start(engines.options("lost-node").queue(QueueOptions.builder("ver-lost")
                .pollInterval(Duration.ofMillis(50)).drainTimeout(Duration.ofMillis(200)).build()), hanging);
        assertThat(entered.await(WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        dying.closeLater().block(WAIT);
        Instance left = producer.get(id).block(WAIT);
        assertThat(left.status()).isEqualTo(InstanceStatus.EXECUTING);
        assertThat(left.typeVersion()).isEqualTo(2);
        assertThat(producer.codec().decode(left.stateJson(), Order.class)).isEqualTo(new Order("l", 4, "EUR"));

        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine healthy = engines.start(serving("after-lost", "ver-lost").meterRegistry(meters),
                v2ish("lostmig", "ver-lost"));
        Instance done = engines.awaitStatus(healthy, id, InstanceStatus.DONE, WAIT);
        assertThat(done.resultJson()).isEqualTo("\"EUR\"");
        assertThat(meters.find("durable.workflow.migrations").counters()).allMatch(counter -> counter.count() == 0);
    }

    private static WorkflowDefinition<Order> v2ish(String type, String queue) {
        return WorkflowDefinition.builder(type, Order.class).queue(queue).version(2).backoff(FAST)
                .step("start", ctx -> Mono.just(Outcome.done(ctx.state().currency())))
                .migration(StateMigration.from(1).state(OrderV1.class, old -> new Order(old.id(), old.cents(), "EUR")))
                .build();
    }
}
