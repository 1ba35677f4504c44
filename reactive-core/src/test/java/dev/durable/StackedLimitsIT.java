package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** A row's limits are admitted all or nothing by the PostgreSQL limiter (issue 21). */
@ExtendWith(PostgresExtension.class)
class StackedLimitsIT {

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

    private static QueueOptions queue(String name) {
        return QueueOptions.builder(name).pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200))
                .build();
    }

    private double tokens(String rateLimit) {
        List<Double> tokens = Sql.query(db, "SELECT tokens FROM {schema}.durable_rate_buckets WHERE name = $1",
                row -> row.get(0, Double.class), rateLimit);
        return tokens.isEmpty() ? Double.NaN : tokens.get(0);
    }

    @Test
    void aFullGateSpendsNoTokensAndTheBucketAdmitsItsWholeBudget() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger holding = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("stacked", String.class, (String s) -> {
            if (s.equals("holder")) {
                holding.incrementAndGet();
                return release.asMono().thenReturn(s);
            }
            return Mono.just(s);
        }).queue("stacked");
        DurableEngine engine = engines.start(engines.options("stacked").gate("narrow", 1)
                .rateLimit("budget", TRICKLE, 6).queue(queue("stacked")), job);
        long holder = engine.insert(JobRequest.of("stacked", "holder").gate("narrow", "k")).block(WAIT);
        Eventually.until("the holder running", WAIT, () -> holding.get() == 1);

        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            requests.add(JobRequest.of("stacked", "r" + i).gate("narrow", "k").rateLimit("budget"));
        }
        engine.insertAll(requests).block(WAIT);
        long picks = engine.queueStats("stacked").orElseThrow().picks();
        Eventually.until("several picks with the gate full", WAIT,
                () -> engine.queueStats("stacked").orElseThrow().picks() >= picks + 5);
        // The gate refused them all, so their bucket gave nothing away.
        assertThat(Double.isNaN(tokens("budget")) || tokens("budget") > 5.99).isTrue();

        release.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, holder, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // One at a time through the gate, each spending only its own token: the whole budget of six runs.
        Eventually.until("all six done", WAIT, () -> Sql.count(db, "queue = 'stacked' AND status = 'done'") == 7);
        assertThat(tokens("budget")).isLessThan(0.5);
    }

    @Test
    void aWindowInTheRateSlotAdmitsItsLimitAllOrNothingWithTheGate() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger holding = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("windowed", String.class, (String s) -> {
            if (s.equals("holder")) {
                holding.incrementAndGet();
                return release.asMono().thenReturn(s);
            }
            return Mono.just(s);
        }).queue("windowed");
        DurableEngine engine = engines.start(engines.options("windowed").gate("one", 1)
                .window("hourly", 4, Duration.ofHours(1)).queue(queue("windowed")), job);
        long holder = engine.insert(JobRequest.of("windowed", "holder").gate("one", "k")).block(WAIT);
        Eventually.until("the holder running", WAIT, () -> holding.get() == 1);
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            requests.add(JobRequest.of("windowed", "g" + i).gate("one", "k").window("hourly", 1, "tenant"));
        }
        for (int i = 0; i < 3; i++) {
            requests.add(JobRequest.of("windowed", "w" + i).window("hourly", 1, "other"));
        }
        engine.insertAll(requests).block(WAIT);
        // The window alone: all three of the other partition run.
        Eventually.until("the other partition's rows done", WAIT,
                () -> Sql.count(db, "queue = 'windowed' AND status = 'done'") == 3);
        long picks = engine.queueStats("windowed").orElseThrow().picks();
        Eventually.until("several picks with the gate full", WAIT,
                () -> engine.queueStats("windowed").orElseThrow().picks() >= picks + 5);
        release.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, holder, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // Through the gate one at a time, the window counting only the rows it admitted: four of six.
        Eventually.until("four gated rows done", WAIT,
                () -> Sql.count(db, "queue = 'windowed' AND status = 'done'") == 8);
        long before = engine.queueStats("windowed").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("windowed").orElseThrow().picks() >= before + 5);
        assertThat(Sql.count(db, "queue = 'windowed' AND status = 'done'")).isEqualTo(8);
        assertThat(Sql.count(db, "queue = 'windowed' AND status = 'runnable'")).isEqualTo(2);
    }

    @Test
    void everyInlineStepDrawsFromItsWindowAndGoesThroughTheQueueWhenItIsFull() {
        AtomicInteger thirdSteps = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("window-chain", String.class).queue("wchain")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.just(Outcome.next("c", ctx.state() + "b").inline()))
                .step("c", ctx -> {
                    thirdSteps.incrementAndGet();
                    return Mono.just(Outcome.done(ctx.state() + "c"));
                })
                .build();
        DurableEngine engine = engines.start(engines.options("wchain").window("twice", 2, Duration.ofHours(1))
                .queue(queue("wchain")), chain);
        long id = engine.insert(JobRequest.of("window-chain", "").window("twice", 1, "p")).block(WAIT);
        // The pick took one for step a, step b drew the second, step c found the window full.
        Eventually.until("step c back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "c".equals(instance.step()));
        long picks = engine.queueStats("wchain").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("wchain").orElseThrow().picks() >= picks + 3);
        assertThat(thirdSteps.get()).isZero();
        assertThat(engine.limits().tryAcquire("twice", "p", 1).block(WAIT)).isEmpty();
    }

    @Test
    void aRowItsBucketRefusesHoldsNoGateSlot() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger running = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("slotless", String.class, (String s) -> {
            running.incrementAndGet();
            return release.asMono().thenReturn(s);
        }).queue("slotless");
        DurableEngine engine = engines.start(engines.options("slotless").gate("two", 2)
                .rateLimit("once", TRICKLE, 1).queue(queue("slotless")), job);
        engine.insertAll(List.of(JobRequest.of("slotless", "a").gate("two", "k").rateLimit("once"),
                JobRequest.of("slotless", "b").gate("two", "k").rateLimit("once"))).block(WAIT);
        Eventually.until("one running", WAIT, () -> running.get() == 1);
        long picks = engine.queueStats("slotless").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("slotless").orElseThrow().picks() >= picks + 5);
        // The second row's bucket was empty: it holds no slot, so one of the two is still free.
        assertThat(running.get()).isEqualTo(1);
        assertThat(engine.limits().tryAcquire("two", "k", 1).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("two", "k", 1).block(WAIT)).isEmpty();
        release.tryEmitValue(true);
    }
}
