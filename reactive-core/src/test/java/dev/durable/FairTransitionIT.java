package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * A workflow transition that moves its next step to another fairness key, on the real database: the
 * step is claimed by a pick under the new key (its pass advances, the row carries it), on a queue that
 * caps its keys the row's cap gate follows the key (so the new key's cap holds), a row with a key of
 * its own keeps it, and a transition that keeps its key may still run inline.
 */
@ExtendWith(PostgresExtension.class)
class FairTransitionIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    /**
     * Key a weighs 4, so a claim advances its pass by 0.25 (and one at insert not at all): key b starts
     * at most there when it turns active, and only a claim under b (by 1 / 1) takes its pass to 1.
     */
    @Test
    void aStepMovedToAnotherKeyIsClaimedUnderIt(TestDatabase db) {
        WorkflowDefinition<String> move = WorkflowDefinition.builder("fair-move", String.class).queue("fmove")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").fairnessKey("tenant-b")))
                .step("b", ctx -> Mono.just(Outcome.done(ctx.state() + "b")))
                .build();
        WorkflowDefinition<String> back = WorkflowDefinition.builder("fair-back", String.class).queue("fmove")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").defaultFairnessKey()))
                .step("b", ctx -> Mono.just(Outcome.done(ctx.state() + "b")))
                .build();
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("fmove").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().weight("tenant-a", 4).weight("tenant-c", 4).build())
                                .build()).build())
                .register(move).register(back).build();
        try {
            engine.start().block(WAIT);
            long moved = engine.insert(JobRequest.of("fair-move", "").fairnessKey("tenant-a")).block(WAIT);
            assertThat(awaitDone(engine, moved).result(String.class)).isEqualTo("ab");
            assertThat(historyKey(db, moved)).isEqualTo("tenant-b");
            assertThat(pass(db, "fmove", "tenant-b")).as("b's pass, advanced by its claim").isGreaterThanOrEqualTo(1.0);
            // A claim per step: b went through the pick, not inline. (At least: a pick that lands while
            // step a's run is still being wound up gives the row back, and a later pick claims it again.)
            assertThat(engine.queueStats("fmove").orElseThrow().picked()).as("%s", engine.queueStats("fmove"))
                    .isGreaterThanOrEqualTo(2);

            // Cleared, the key is the queue's default "" (as a keyless insert's), claimed under it too.
            long cleared = engine.insert(JobRequest.of("fair-back", "").fairnessKey("tenant-c")).block(WAIT);
            assertThat(awaitDone(engine, cleared).result(String.class)).isEqualTo("ab");
            assertThat(historyKey(db, cleared)).isEqualTo("");
            assertThat(engine.queueStats("fmove").orElseThrow().picked()).isGreaterThanOrEqualTo(4);
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    /**
     * A queue capping each key at 2: twelve instances move from key a to key b, whose step takes a
     * while. Their waiting rows hold the cap gate under b, and no more than 2 of b's steps ever run
     * (counted in the steps and on the database); an instance with a concurrency key of its own keeps it.
     */
    @Test
    void theCapGateFollowsTheKeyUnlessTheRowHoldsItsOwn(TestDatabase db) throws Exception {
        AtomicInteger running = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        WorkflowDefinition<String> move = WorkflowDefinition.builder("capped-move", String.class).queue("fcap")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state()).fairnessKey("tenant-b")))
                .step("b", ctx -> {
                    if (ctx.state().equals("own")) {
                        return Mono.just(Outcome.<String>done(ctx.state()));
                    }
                    most.accumulateAndGet(running.incrementAndGet(), Math::max);
                    return Mono.delay(Duration.ofMillis(200))
                            .then(Mono.fromCallable(() -> {
                                running.decrementAndGet();
                                return Outcome.<String>done(ctx.state());
                            }));
                })
                .build();
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("fcap").concurrency(10).pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().maxExecutingPerKey(2).build()).build()).build())
                .register(move).build();
        String gate = Fairness.capGate("fcap");
        AtomicBoolean sampling = new AtomicBoolean(true);
        AtomicInteger mostOnDb = new AtomicInteger();
        Set<String> waitingHeld = ConcurrentHashMap.newKeySet();
        Thread sampler = new Thread(() -> {
            while (sampling.get()) {
                for (long executing : Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE queue = 'fcap'"
                        + " AND status = 'executing' AND fairness_key = 'tenant-b'"
                        + " AND concurrency_key IS DISTINCT FROM 'own'", row -> row.get(0, Long.class))) {
                    mostOnDb.accumulateAndGet((int) executing, Math::max);
                }
                waitingHeld.addAll(Sql.query(db, "SELECT coalesce(gate_name, '-') || '/' || coalesce(concurrency_key, '-')"
                        + " FROM {schema}.durable_instances WHERE queue = 'fcap' AND status = 'runnable' AND step = 'b'"
                        + " AND concurrency_key IS DISTINCT FROM 'own'",
                        row -> row.get(0, String.class)));
                Eventually.sleep(10);
            }
        }, "fcap-sampler");
        try {
            engine.start().block(WAIT);
            sampler.start();
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                requests.add(JobRequest.of("capped-move", "s" + i).fairnessKey("tenant-a"));
            }
            requests.add(JobRequest.of("capped-move", "own").fairnessKey("tenant-a").concurrencyKey("own"));
            List<Long> ids = engine.insertAll(requests).block(WAIT);
            for (long id : ids) {
                assertThat(awaitDone(engine, id).status()).isEqualTo(InstanceStatus.DONE);
            }
            sampling.set(false);
            sampler.join();

            assertThat(most.get()).as("b's steps running at once").isBetween(1, 2);
            assertThat(mostOnDb.get()).as("b's rows executing at once, on the database").isLessThanOrEqualTo(2);
            assertThat(waitingHeld).as("what step b's waiting rows held").isNotEmpty()
                    .allMatch(held -> held.equals(gate + "/tenant-b"));
            for (long id : ids) {
                assertThat(historyKey(db, id)).isEqualTo("tenant-b");
            }
            assertThat(Sql.query(db, "SELECT concurrency_key FROM {schema}.durable_history WHERE id = $1",
                    row -> row.get(0, String.class), ids.get(12))).containsExactly("own");
        } finally {
            sampling.set(false);
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void aTransitionThatKeepsItsKeyStaysInline(TestDatabase db) {
        WorkflowDefinition<String> keep = WorkflowDefinition.builder("fair-keep", String.class).queue("fkeep")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.just(Outcome.done(ctx.state() + "b")))
                .build();
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("fkeep").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().maxExecutingPerKey(1).build()).build()).build())
                .register(keep).build();
        try {
            engine.start().block(WAIT);
            long id = engine.insert(JobRequest.of("fair-keep", "").fairnessKey("tenant-a")).block(WAIT);
            assertThat(awaitDone(engine, id).result(String.class)).isEqualTo("ab");
            assertThat(historyKey(db, id)).isEqualTo("tenant-a");
            // One claim: step b ran on it.
            assertThat(engine.queueStats("fkeep").orElseThrow().picked()).isEqualTo(1);
        } finally {
            engine.closeLater().block(WAIT);
        }
        assertThatThrownBy(() -> Outcome.next("b", "").fairnessKey("tenant-b").inline())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fairness key");
        assertThatThrownBy(() -> Outcome.next("b", "").inline().defaultFairnessKey())
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Outcome.next("b", "").fairnessKey(" "))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fairnessKey");
        assertThatThrownBy(() -> Outcome.done("x").fairnessKey("tenant-b")).isInstanceOf(IllegalArgumentException.class);
    }

    private static Instance awaitDone(DurableEngine engine, long id) {
        Instance instance = Eventually.until("instance " + id + " settled", WAIT, () -> engine.get(id).block(WAIT),
                got -> got.status().isTerminal());
        assertThat(instance.status()).as("instance %d (error %s)", id, instance.lastError()).isEqualTo(InstanceStatus.DONE);
        return instance;
    }

    private static String historyKey(TestDatabase db, long id) {
        return Sql.query(db, "SELECT fairness_key FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, String.class), id).get(0);
    }

    private static double pass(TestDatabase db, String queue, String key) {
        return Sql.query(db, "SELECT pass FROM {schema}.durable_fair_keys WHERE queue = $1 AND fairness_key = $2",
                row -> row.get(0, Double.class), queue, key).get(0);
    }
}
