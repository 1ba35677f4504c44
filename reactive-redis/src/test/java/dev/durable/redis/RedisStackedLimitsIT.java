package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
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

/** A row's limits are admitted all or nothing by the Redis limiter (issue 21). */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisStackedLimitsIT {

    static final Duration WAIT = Duration.ofSeconds(60);
    private static final double TRICKLE = 0.001;

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;
    private TestRedisServer redis;

    @BeforeEach
    void setUp(TestDatabase database, TestRedisServer server) {
        db = database;
        redis = server;
        engines.on(database);
    }

    /** The limiter under test; the RedisCluster* subclasses run these cases on a Redis Cluster. */
    dev.durable.limit.LimiterFactory limiter() {
        return RedisLimiters.redis(redis.uri());
    }

    private static QueueOptions queue(String name) {
        return QueueOptions.builder(name).pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200))
                .build();
    }

    @Test
    void aGateThatRefusesARowSpendsNoneOfItsTokensAndTheBucketAdmitsItsWholeBudget() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger holding = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("rstacked", String.class, (String s) -> {
            if (s.equals("holder")) {
                holding.incrementAndGet();
                return release.asMono().thenReturn(s);
            }
            return Mono.just(s);
        }).queue("rstacked");
        DurableEngine engine = engines.start(engines.options("rstacked").limiter(limiter())
                .gate("rnarrow", 1).rateLimit("rbudget", TRICKLE, 6).queue(queue("rstacked")), job);
        long holder = engine.insert(JobRequest.of("rstacked", "holder").gate("rnarrow", "k")).block(WAIT);
        Eventually.until("the holder running", WAIT, () -> holding.get() == 1);

        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            requests.add(JobRequest.of("rstacked", "r" + i).gate("rnarrow", "k").rateLimit("rbudget"));
        }
        engine.insertAll(requests).block(WAIT);
        long picks = engine.queueStats("rstacked").orElseThrow().picks();
        Eventually.until("several picks with the gate full", WAIT,
                () -> engine.queueStats("rstacked").orElseThrow().picks() >= picks + 5);
        release.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, holder, WAIT).status()).isEqualTo(InstanceStatus.DONE);

        // One at a time through the gate, each spending only its own token: the whole budget of six runs.
        Eventually.until("all six done", WAIT, () -> Sql.count(db, "queue = 'rstacked' AND status = 'done'") == 7);
        assertThat(Sql.count(db, "queue = 'rstacked' AND status = 'runnable'")).isZero();
    }

    @Test
    void aWindowInTheRateSlotAdmitsItsLimitAllOrNothingWithTheGate() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger holding = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("rwindowed", String.class, (String s) -> {
            if (s.equals("holder")) {
                holding.incrementAndGet();
                return release.asMono().thenReturn(s);
            }
            return Mono.just(s);
        }).queue("rwindowed");
        DurableEngine engine = engines.start(engines.options("rwindowed").limiter(limiter()).gate("rone", 1)
                .window("rhourly", 4, Duration.ofHours(1)).queue(queue("rwindowed")), job);
        long holder = engine.insert(JobRequest.of("rwindowed", "holder").gate("rone", "k")).block(WAIT);
        Eventually.until("the holder running", WAIT, () -> holding.get() == 1);
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            requests.add(JobRequest.of("rwindowed", "g" + i).gate("rone", "k").window("rhourly", 1, "tenant"));
        }
        for (int i = 0; i < 3; i++) {
            requests.add(JobRequest.of("rwindowed", "w" + i).window("rhourly", 1, "other"));
        }
        engine.insertAll(requests).block(WAIT);
        // The window alone: all three of the other partition run.
        Eventually.until("the other partition's rows done", WAIT,
                () -> Sql.count(db, "queue = 'rwindowed' AND status = 'done'") == 3);
        long picks = engine.queueStats("rwindowed").orElseThrow().picks();
        Eventually.until("several picks with the gate full", WAIT,
                () -> engine.queueStats("rwindowed").orElseThrow().picks() >= picks + 5);
        release.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, holder, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // Through the gate one at a time, the window counting only the rows it admitted: four of six.
        Eventually.until("four gated rows done", WAIT,
                () -> Sql.count(db, "queue = 'rwindowed' AND status = 'done'") == 8);
        long before = engine.queueStats("rwindowed").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("rwindowed").orElseThrow().picks() >= before + 5);
        assertThat(Sql.count(db, "queue = 'rwindowed' AND status = 'done'")).isEqualTo(8);
        assertThat(Sql.count(db, "queue = 'rwindowed' AND status = 'runnable'")).isEqualTo(2);
    }

    @Test
    void aRowItsBucketRefusesHoldsNoGateSlot() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger running = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("rslotless", String.class, (String s) -> {
            running.incrementAndGet();
            return release.asMono().thenReturn(s);
        }).queue("rslotless");
        DurableEngine engine = engines.start(engines.options("rslotless").limiter(limiter()).gate("rtwo", 2)
                .rateLimit("ronce", TRICKLE, 1).queue(queue("rslotless")), job);
        engine.insertAll(List.of(JobRequest.of("rslotless", "a").gate("rtwo", "k").rateLimit("ronce"),
                JobRequest.of("rslotless", "b").gate("rtwo", "k").rateLimit("ronce"))).block(WAIT);
        Eventually.until("one running", WAIT, () -> running.get() == 1);
        long picks = engine.queueStats("rslotless").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("rslotless").orElseThrow().picks() >= picks + 5);
        // The second row's bucket was empty: it holds no slot, so one of the two is still free (read
        // with the picks stopped: one in flight holds the slot a moment before giving it back).
        assertThat(running.get()).isEqualTo(1);
        quiesce(engine, "rslotless");
        assertThat(engine.limits().tryAcquire("rtwo", "k", 1).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("rtwo", "k", 1).block(WAIT)).isEmpty();
        release.tryEmitValue(true);
    }

    private static JobDefinition<String, String> echo(String type) {
        return JobDefinition.of(type, String.class, (String s) -> Mono.just(s)).queue(type);
    }

    /** A gate, a per-tenant bucket and a per-tenant hourly window: the tenant is the type. */
    private static JobRequest stacked(String type, String arg) {
        return JobRequest.of(type, arg).gate("rglobal", type).rateLimit("rtenant", type).window("rhour", type);
    }

    /**
     * Stops the queue's picks before reading the limits: a Redis pick holds its rows' gate slots for a
     * moment between taking them and giving back those a later limit refused, so a read during a pick
     * could see them (all the longer on a loaded machine). Paused, a pick admits nothing; two more
     * picks make sure none is still in flight.
     */
    private static void quiesce(DurableEngine engine, String queue) {
        engine.admin().pauseQueue(queue).block(WAIT);
        long picks = engine.queueStats(queue).orElseThrow().picks();
        Eventually.until("two picks of the paused queue", WAIT,
                () -> engine.queueStats(queue).orElseThrow().picks() >= picks + 2);
    }

    @Test
    void aRowItsWindowRefusesTakesNoTokenAndNoSlot() {
        DurableEngine engine = engines.start(engines.options("rwfull").limiter(limiter())
                .gate("rglobal", 2).rateLimit("rtenant", TRICKLE, 2).window("rhour", 1, Duration.ofHours(1))
                .queue(queue("rwfull")), echo("rwfull"));
        long first = engine.insert(stacked("rwfull", "first")).block(WAIT);
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        engine.insertAll(List.of(stacked("rwfull", "a"), stacked("rwfull", "b"), stacked("rwfull", "c"))).block(WAIT);
        long picks = engine.queueStats("rwfull").orElseThrow().picks();
        Eventually.until("several picks with the window full", WAIT,
                () -> engine.queueStats("rwfull").orElseThrow().picks() >= picks + 5);
        assertThat(Sql.count(db, "queue = 'rwfull' AND status = 'runnable'")).isEqualTo(3);
        quiesce(engine, "rwfull");
        // The window refused them: the bucket kept its second token and the gate both its slots.
        assertThat(engine.limits().tryAcquire("rglobal", "rwfull", 2).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("rtenant", "rwfull", 1).block(WAIT)).isPresent();
    }

    @Test
    void aRowItsBucketRefusesTakesNoWindowCountAndTheTighterLimitAdmits() {
        DurableEngine engine = engines.start(engines.options("rbempty").limiter(limiter())
                .gate("rglobal", 4).rateLimit("rtenant", TRICKLE, 3).window("rhour", 5, Duration.ofHours(1))
                .queue(queue("rbempty")), echo("rbempty"));
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            requests.add(stacked("rbempty", "r" + i));
        }
        engine.insertAll(requests).block(WAIT);
        Eventually.until("the bucket's three done", WAIT,
                () -> Sql.count(db, "queue = 'rbempty' AND status = 'done'") == 3);
        long picks = engine.queueStats("rbempty").orElseThrow().picks();
        Eventually.until("several picks with the bucket empty", WAIT,
                () -> engine.queueStats("rbempty").orElseThrow().picks() >= picks + 5);
        assertThat(Sql.count(db, "queue = 'rbempty' AND status = 'done'")).isEqualTo(3);
        quiesce(engine, "rbempty");
        // The window counted the three that ran only (counts taken for refused rows went back): two left.
        assertThat(engine.limits().tryAcquire("rhour", "rbempty", 2).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("rhour", "rbempty", 1).block(WAIT)).isEmpty();
        assertThat(engine.limits().tryAcquire("rglobal", "rbempty", 4).block(WAIT)).isPresent();
    }

    @Test
    void everyInlineStepDrawsFromItsBucketAndItsWindowTogether() {
        AtomicInteger thirdSteps = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("rstacked-chain", String.class).queue("rschain")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.just(Outcome.next("c", ctx.state() + "b").inline()))
                .step("c", ctx -> {
                    thirdSteps.incrementAndGet();
                    return Mono.just(Outcome.done(ctx.state() + "c"));
                })
                .build();
        DurableEngine engine = engines.start(engines.options("rschain").limiter(limiter())
                .rateLimit("rtenant", TRICKLE, 10).window("rhour", 2, Duration.ofHours(1)).queue(queue("rschain")),
                chain);
        long id = engine.insert(JobRequest.of("rstacked-chain", "").rateLimit("rtenant", "rschain")
                .window("rhour", "rschain")).block(WAIT);
        Eventually.until("step c back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "c".equals(instance.step()));
        long picks = engine.queueStats("rschain").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("rschain").orElseThrow().picks() >= picks + 3);
        assertThat(thirdSteps.get()).isZero();
        assertThat(engine.limits().tryAcquire("rhour", "rschain", 1).block(WAIT)).isEmpty();
        // Two of ten tokens taken (steps a and b): the refused draws of step c took none.
        assertThat(engine.limits().tryAcquire("rtenant", "rschain", 8).block(WAIT)).isPresent();
    }

    /**
     * A transition moves its next step to another sliding window or out of any, as it does its gate
     * and rate limit: each window admits one a hour, so step b ran only under its new window (the
     * first was full after step a) and step c only under none (the new one was full after b).
     */
    @Test
    void aTransitionMovesItsNextStepToAnotherWindowOrOutOfAny() {
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("window-move", String.class).queue("rwmove")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").window("rnarrow", 1, "q")))
                .step("b", ctx -> Mono.just(Outcome.next("c", ctx.state() + "b").noWindow()))
                .step("c", ctx -> Mono.just(Outcome.done(ctx.state() + "c")))
                .build();
        DurableEngine engine = engines.start(engines.options("rwmove").limiter(limiter()).window("ronce", 1, Duration.ofHours(1))
                .window("rnarrow", 1, Duration.ofHours(1)).queue(queue("rwmove")), flow);
        long id = engine.insert(JobRequest.of("window-move", "").window("ronce", 1, "p")).block(WAIT);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(engine.limits().tryAcquire("ronce", "p", 1).block(WAIT)).isEmpty();
        assertThat(engine.limits().tryAcquire("rnarrow", "q", 1).block(WAIT)).isEmpty();

        // Another run: its step b waits for the full new window, which its row now names.
        long waits = engine.insert(JobRequest.of("window-move", "").window("ronce", 1, "p2")).block(WAIT);
        Eventually.until("step b waiting", WAIT, () -> engine.get(waits).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "b".equals(instance.step()));
        long picks = engine.queueStats("rwmove").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("rwmove").orElseThrow().picks() >= picks + 3);
        assertThat(engine.get(waits).block(WAIT).step()).isEqualTo("b");
        assertThat(Sql.query(db, "SELECT window_name || '/' || window_partition FROM {schema}.durable_instances"
                + " WHERE id = $1", row -> row.get(0, String.class), waits)).containsExactly("rnarrow/q");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> Outcome.next("b", "").window("rnarrow", 1, "q").inline())
                .isInstanceOf(IllegalArgumentException.class);
    }
}
