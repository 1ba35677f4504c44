package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * How limits admit what no pick admits (inline steps), what they hold back (counted and told), and
 * a gate shard's counter that another transaction holds (issue 17, items 2, 3 and 6).
 */
@ExtendWith(PostgresExtension.class)
class LimitAdmissionIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    /** A refill so slow that no test lives long enough to see a whole token come back. */
    private static final double TRICKLE = 0.001;

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private QueueOptions queue(String name) {
        return QueueOptions.builder(name).pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200))
                .build();
    }

    private double tokens(String rateLimit) {
        return Sql.query(db, "SELECT tokens FROM {schema}.durable_rate_buckets WHERE name = $1",
                row -> row.get(0, Double.class), rateLimit).get(0);
    }

    private long held(String gate) {
        return Sql.query(db, "SELECT coalesce(sum(held), 0)::bigint FROM {schema}.durable_gate_slots WHERE gate = $1",
                row -> row.get(0, Long.class), gate).get(0);
    }

    // ---- Item 2: inline chains draw their tokens ---------------------------------------------

    @Test
    void everyStepOfAnInlineChainDrawsItsToken() {
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("quota-chain", String.class).queue("quota")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.just(Outcome.next("c", ctx.state() + "b").inline()))
                .step("c", ctx -> Mono.just(Outcome.next("d", ctx.state() + "c").inline()))
                .step("d", ctx -> Mono.just(Outcome.done(ctx.state() + "d")))
                .build();
        DurableEngine engine = engines.start(engines.options("quota").rateLimit("quota", TRICKLE, 4)
                .queue(queue("quota")), chain);
        long id = engine.insert(JobRequest.of("quota-chain", "").rateLimit("quota")).block(WAIT);

        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // Four steps, four tokens: the pick drew the first, each inline step its own.
        assertThat(tokens("quota")).isLessThan(0.5);
    }

    @Test
    void anInlineStepItsBucketCannotAffordGoesThroughTheQueueAndGivesItsGateSlotBackOnce() {
        AtomicInteger secondSteps = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("trickle-chain", String.class).queue("trickle")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> {
                    secondSteps.incrementAndGet();
                    return Mono.just(Outcome.done(ctx.state() + "b"));
                })
                .build();
        // Another holder keeps one of the gate's two slots the whole time, so a slot credited twice shows.
        Sinks.One<Boolean> releaseHolder = Sinks.one();
        AtomicInteger holding = new AtomicInteger();
        JobDefinition<String, String> holder = JobDefinition.of("holder", String.class, (String s) -> Mono.defer(() -> {
            holding.incrementAndGet();
            return releaseHolder.asMono().thenReturn(s);
        })).queue("trickle");
        DurableEngine engine = engines.start(engines.options("trickle").rateLimit("trickle", TRICKLE, 1)
                .gate("one", 2).queue(queue("trickle")), chain, holder);
        long holderId = engine.insert(JobRequest.of("holder", "h").gate("one", "k")).block(WAIT);
        Eventually.until("the other holder running", WAIT, () -> holding.get() == 1);
        long id = engine.insert(JobRequest.of("trickle-chain", "").rateLimit("trickle").gate("one", "k"))
                .block(WAIT);

        // The pick drew the only token for step a; step b found the bucket empty and went back to
        // the queue, where the pick holds it until the bucket affords it.
        Eventually.until("step b back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "b".equals(instance.step()));
        assertThat(secondSteps.get()).isZero();
        // Its gate slot went back with its claim, once: the other holder's slot is still counted.
        assertThat(held("one")).isEqualTo(1);

        Sql.update(db, "UPDATE {schema}.durable_rate_buckets SET tokens = 1 WHERE name = 'trickle'");
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(secondSteps.get()).isEqualTo(1);
        assertThat(held("one")).isEqualTo(1);
        releaseHolder.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, holderId, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(held("one")).isZero();
    }

    @Test
    void anInlineStepThatKeepsItsGateHoldsItsOneSlotAndGivesItBackOnce() {
        Sinks.One<Boolean> finish = Sinks.one();
        AtomicInteger inB = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("solo-chain", String.class).queue("solo")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> {
                    inB.incrementAndGet();
                    return finish.asMono().thenReturn(Outcome.done(ctx.state() + "b"));
                })
                .build();
        DurableEngine engine = engines.start(engines.options("solo").gate("solo", 1).queue(queue("solo")), chain);
        long id = engine.insert(JobRequest.of("solo-chain", "").gate("solo", "k")).block(WAIT);

        Eventually.until("step b running inline", WAIT, () -> inB.get() == 1);
        assertThat(held("solo")).isEqualTo(1);
        finish.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(held("solo")).isZero();
    }

    // ---- Item 3: throttling is counted and told ----------------------------------------------

    @Test
    void whatAFullGateAndAnEmptyBucketHoldBackIsCountedAndToldOncePerPick() {
        Sinks.One<Boolean> release = Sinks.one();
        JobDefinition<String, String> job = JobDefinition.of("held-back", String.class,
                (String s) -> s.startsWith("narrow") ? release.asMono().thenReturn(s) : Mono.just(s)).queue("held");
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        DurableEngine engine = engines.start(engines.options("held").meterRegistry(meters)
                .gate("narrow", 1).rateLimit("slow", TRICKLE, 1).queue(queue("held")), job);
        List<JobEvent> throttled = new CopyOnWriteArrayList<>();
        Disposable listening = engine.events().filter(event -> event.kind() == JobEvent.Kind.THROTTLED)
                .subscribe(throttled::add);
        try {
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                requests.add(JobRequest.of("held-back", "narrow" + i).gate("narrow"));
                requests.add(JobRequest.of("held-back", "slow" + i).rateLimit("slow"));
            }
            engine.insertAll(requests).block(WAIT);

            Eventually.until("both reasons counted", WAIT,
                    () -> throttledMeter(meters, "gate") > 0 && throttledMeter(meters, "rate") > 0);
            Eventually.until("both reasons told", WAIT,
                    () -> throttled.stream().anyMatch(e -> e.error() != null && e.error().contains("full gate"))
                            && throttled.stream().anyMatch(e -> e.error() != null && e.error().contains("empty bucket")));
            QueueStats stats = engine.queueStats("held").orElseThrow();
            assertThat(stats.throttled()).isPositive();
            // One event per pick and reason, never one per row: at most two per pick so far.
            long events = throttled.size();
            assertThat(events).isLessThanOrEqualTo(2 * engine.queueStats("held").orElseThrow().picks());
            JobEvent sample = throttled.get(0);
            assertThat(sample.queue()).isEqualTo("held");
            assertThat(sample.type()).isEqualTo("held-back");
            assertThat(Sql.count(db, "id = " + sample.id() + " AND queue = 'held'")).isEqualTo(1);
        } finally {
            listening.dispose();
            release.tryEmitValue(true);
        }
    }

    private static double throttledMeter(SimpleMeterRegistry meters, String limit) {
        FunctionCounter counter = meters.find("durable.throttled").tag("queue", "held").tag("limit", limit)
                .functionCounter();
        if (counter != null) {
            return counter.count();
        }
        Counter plain = meters.find("durable.throttled").tag("queue", "held").tag("limit", limit).counter();
        return plain == null ? 0 : plain.count();
    }

    // ---- Item 6: a locked gate shard does not hold up the others -----------------------------

    @Test
    void aGateShardCounterAnotherTransactionHoldsDoesNotHoldUpTheOtherShards() {
        JobDefinition<String, String> job = JobDefinition.of("sharded", String.class, (String s) -> Mono.just(s))
                .queue("sharded");
        // The counters exist (committed), so a lock on one of them is a lock on a row picks upsert.
        for (int shard = 0; shard < 4; shard++) {
            Sql.update(db, "INSERT INTO {schema}.durable_gate_slots (gate, key, shard, capacity, held)"
                    + " VALUES ('hot', 'k', $1, 1, 0)", shard);
        }
        Connection locker = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Flux.from(locker.beginTransaction()).then().block(WAIT);
            Flux.from(locker.createStatement("SELECT held FROM \"" + db.schema() + "\".durable_gate_slots"
                            + " WHERE gate = 'hot' AND key = 'k' AND shard = 0 FOR UPDATE").execute())
                    .concatMap(result -> result.map(row -> 1)).then().block(WAIT);

            DurableEngine engine = engines.start(engines.options("sharded").gate("hot", 4, 4)
                    .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofMinutes(10)).disabled())
                    // A pick's candidates cover every row, so the locked shard's rows never crowd the others out.
                    .queue(QueueOptions.builder("sharded").concurrency(8).prefetch(8)
                            .pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200)).build()), job);
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                requests.add(JobRequest.of("sharded", "j" + i).gate("hot", "k"));
            }
            engine.insertAll(requests).block(WAIT);
            // By id: a settled row moves to the history, which keeps no shard.
            String others = String.join(", ", Sql.query(db, "SELECT id::text FROM {schema}.durable_instances"
                    + " WHERE queue = 'sharded' AND gate_shard <> 0", row -> row.get(0, String.class)));
            assertThat(others).isNotEmpty();

            Eventually.until("rows of the unlocked shards done", WAIT,
                    () -> Sql.count(db, "id IN (" + others + ") AND status <> 'done'") == 0);
            // The locked shard counted as full: none of its rows ran.
            assertThat(Sql.count(db, "queue = 'sharded' AND gate_shard = 0 AND status <> 'runnable'")).isZero();

            Flux.from(locker.rollbackTransaction()).then().block(WAIT);
            Eventually.until("every row done once the lock is gone", WAIT,
                    () -> Sql.count(db, "queue = 'sharded' AND status = 'done'") == 16);
            assertThat(held("hot")).isZero();
        } finally {
            Mono.from(locker.close()).block(WAIT);
        }
    }
}
