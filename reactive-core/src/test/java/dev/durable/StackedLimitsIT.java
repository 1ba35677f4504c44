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

    /** What the window counted for the partition named as the type (each test its own tenant: one schema). */
    private long windowCount(String tenant) {
        List<Long> counts = Sql.query(db, "SELECT (SELECT coalesce(sum(c), 0) FROM unnest(counts) c)::bigint"
                + " FROM {schema}.durable_window_counters WHERE name = 'per-hour' AND partition_key = $1",
                row -> row.get(0, Long.class), tenant);
        return counts.isEmpty() ? 0 : counts.get(0);
    }

    private static JobDefinition<String, String> echo(String type) {
        return JobDefinition.of(type, String.class, (String s) -> Mono.just(s)).queue(type);
    }

    /** The tokens of the tenant named as the type. */
    private double tenantTokens(String tenant) {
        List<Double> tokens = Sql.query(db, "SELECT tokens FROM {schema}.durable_rate_buckets"
                + " WHERE name = 'per-tenant' AND partition_key = $1", row -> row.get(0, Double.class), tenant);
        return tokens.isEmpty() ? Double.NaN : tokens.get(0);
    }

    /** A global gate, a per-tenant bucket and a per-tenant hourly window: the tenant is the type. */
    private static JobRequest stacked(String type, String arg) {
        return JobRequest.of(type, arg).gate("global", type).rateLimit("per-tenant", type).window("per-hour", type);
    }

    @Test
    void aRowItsWindowRefusesTakesNoTokenAndNoSlot() {
        DurableEngine engine = engines.start(engines.options("wfull").gate("global", 2)
                .rateLimit("per-tenant", TRICKLE, 5).window("per-hour", 1, Duration.ofHours(1))
                .queue(queue("wfull")), echo("wfull"));
        long first = engine.insert(stacked("wfull", "first")).block(WAIT);
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        engine.insertAll(List.of(stacked("wfull", "a"), stacked("wfull", "b"), stacked("wfull", "c"))).block(WAIT);
        long picks = engine.queueStats("wfull").orElseThrow().picks();
        Eventually.until("several picks with the window full", WAIT,
                () -> engine.queueStats("wfull").orElseThrow().picks() >= picks + 5);
        assertThat(Sql.count(db, "queue = 'wfull' AND status = 'runnable'")).isEqualTo(3);
        // The window refused them: the bucket kept its four tokens, the window its one count, the gate its slots.
        assertThat(tenantTokens("wfull")).isGreaterThan(3.99);
        assertThat(windowCount("wfull")).isEqualTo(1);
        assertThat(engine.limits().tryAcquire("global", "wfull", 2).block(WAIT)).isPresent();
    }

    @Test
    void aRowItsBucketRefusesTakesNoWindowCountAndTheTighterLimitAdmits() {
        DurableEngine engine = engines.start(engines.options("bempty").gate("global", 4)
                .rateLimit("per-tenant", TRICKLE, 3).window("per-hour", 5, Duration.ofHours(1))
                .queue(queue("bempty")), echo("bempty"));
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            requests.add(stacked("bempty", "r" + i));
        }
        engine.insertAll(requests).block(WAIT);
        Eventually.until("the bucket's three done", WAIT, () -> Sql.count(db, "queue = 'bempty' AND status = 'done'") == 3);
        long picks = engine.queueStats("bempty").orElseThrow().picks();
        Eventually.until("several picks with the bucket empty", WAIT,
                () -> engine.queueStats("bempty").orElseThrow().picks() >= picks + 5);
        // The bucket (3) is the tighter limit: three ran, and the window counted those three only.
        assertThat(Sql.count(db, "queue = 'bempty' AND status = 'done'")).isEqualTo(3);
        assertThat(windowCount("bempty")).isEqualTo(3);
        // admin().limits() shows the window's partition with what it counted.
        assertThat(engine.admin().limits().block(WAIT).windows())
                .contains(new dev.durable.admin.WindowUsage("per-hour", "bempty", 3, 5));
        assertThat(engine.limits().tryAcquire("global", "bempty", 4).block(WAIT)).isPresent();
    }

    @Test
    void theWindowIsTheTighterLimitAndSettledAndReplayedRowsKeepBothLimits() {
        DurableEngine engine = engines.start(engines.options("wtight").gate("global", 4)
                .rateLimit("per-tenant", TRICKLE, 6).window("per-hour", 2, Duration.ofHours(1))
                .queue(queue("wtight")), echo("wtight"));
        long first = engine.insert(stacked("wtight", "first")).block(WAIT);
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(Sql.query(db, "SELECT rate_limit || ' ' || rate_partition || ' ' || window_name || ' '"
                + " || window_partition || ' ' || window_weight FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, String.class), first)).containsExactly("per-tenant wtight per-hour wtight 1");
        engine.replay(first, "run").block(WAIT);
        Eventually.until("the replay done", WAIT, () -> Sql.query(db,
                "SELECT count(*) FROM {schema}.durable_history WHERE id = $1", row -> row.get(0, Long.class), first)
                .get(0) == 1L);
        assertThat(windowCount("wtight")).isEqualTo(2);
        long more = engine.insert(stacked("wtight", "more")).block(WAIT);
        long picks = engine.queueStats("wtight").orElseThrow().picks();
        Eventually.until("several picks with the window full", WAIT,
                () -> engine.queueStats("wtight").orElseThrow().picks() >= picks + 5);
        assertThat(Sql.count(db, "id = " + more + " AND status = 'runnable'")).isEqualTo(1);
        // Two runs through the window: two tokens of six spent, none for the refused row.
        assertThat(tenantTokens("wtight")).isBetween(3.99, 4.01);
        // A fork starts with its source's limits too (it waits: the window is full).
        long fork = engine.fork(first, "run").block(WAIT);
        assertThat(Sql.query(db, "SELECT window_name || ' ' || window_partition || ' ' || rate_limit"
                + " FROM {schema}.durable_instances WHERE id = $1", row -> row.get(0, String.class), fork))
                .containsExactly("per-hour wtight per-tenant");
    }

    @Test
    void everyInlineStepDrawsFromItsBucketAndItsWindowTogether() {
        AtomicInteger thirdSteps = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("stacked-chain", String.class).queue("schain")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.just(Outcome.next("c", ctx.state() + "b").inline()))
                .step("c", ctx -> {
                    thirdSteps.incrementAndGet();
                    return Mono.just(Outcome.done(ctx.state() + "c"));
                })
                .build();
        DurableEngine engine = engines.start(engines.options("schain").rateLimit("per-tenant", TRICKLE, 10)
                .window("per-hour", 2, Duration.ofHours(1)).queue(queue("schain")), chain);
        long id = engine.insert(JobRequest.of("stacked-chain", "").rateLimit("per-tenant", "schain")
                .window("per-hour", "schain")).block(WAIT);
        // The pick took a token and a count for step a, step b drew both, step c found the window full.
        Eventually.until("step c back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "c".equals(instance.step()));
        long picks = engine.queueStats("schain").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("schain").orElseThrow().picks() >= picks + 3);
        assertThat(thirdSteps.get()).isZero();
        assertThat(windowCount("schain")).isEqualTo(2);
        // Two tokens: step c's refused draw took none.
        assertThat(tenantTokens("schain")).isBetween(7.99, 8.01);
    }

    @Test
    void aFollowUpKeepsItsRequestsBucketAndWindow() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger running = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("sfollow", String.class, (String s) -> {
            running.incrementAndGet();
            return s.equals("first") ? release.asMono().thenReturn(s) : Mono.just(s);
        }).queue("sfollow");
        DurableEngine engine = engines.start(engines.options("sfollow").gate("global", 4)
                .rateLimit("per-tenant", TRICKLE, 5).window("per-hour", 5, Duration.ofHours(1))
                .queue(queue("sfollow")), job);
        long first = engine.insert(stacked("sfollow", "first").correlationKey("k")).block(WAIT);
        Eventually.until("the first running", WAIT, () -> running.get() == 1);
        long followUp = engine.insertWithResult(stacked("sfollow", "second").correlationKey("k")
                .onConflict(ConflictPolicy.replace())).block(WAIT).id();
        release.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(engines.awaitSettled(engine, followUp, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(Sql.query(db, "SELECT rate_limit || ' ' || rate_partition || ' ' || window_name || ' '"
                + " || window_partition || ' ' || window_weight FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, String.class), followUp)).containsExactly("per-tenant sfollow per-hour sfollow 1");
        // Both runs went through the window.
        assertThat(windowCount("sfollow")).isEqualTo(2);
    }

    /**
     * A transition moves its next step to another sliding window or out of any, as it does its gate
     * and rate limit: each window admits one a hour, so step b ran only under its new window (the
     * first was full after step a) and step c only under none (the new one was full after b).
     */
    @Test
    void aTransitionMovesItsNextStepToAnotherWindowOrOutOfAny() {
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("window-move", String.class).queue("wmove")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").window("narrow", 1, "q")))
                .step("b", ctx -> Mono.just(Outcome.next("c", ctx.state() + "b").noWindow()))
                .step("c", ctx -> Mono.just(Outcome.done(ctx.state() + "c")))
                .build();
        DurableEngine engine = engines.start(engines.options("wmove").window("once", 1, Duration.ofHours(1))
                .window("narrow", 1, Duration.ofHours(1)).queue(queue("wmove")), flow);
        long id = engine.insert(JobRequest.of("window-move", "").window("once", 1, "p")).block(WAIT);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(engine.limits().tryAcquire("once", "p", 1).block(WAIT)).isEmpty();
        assertThat(engine.limits().tryAcquire("narrow", "q", 1).block(WAIT)).isEmpty();

        // Another run: its step b waits for the full new window, which its row now names.
        long waits = engine.insert(JobRequest.of("window-move", "").window("once", 1, "p2")).block(WAIT);
        Eventually.until("step b waiting", WAIT, () -> engine.get(waits).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "b".equals(instance.step()));
        long picks = engine.queueStats("wmove").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("wmove").orElseThrow().picks() >= picks + 3);
        assertThat(engine.get(waits).block(WAIT).step()).isEqualTo("b");
        assertThat(Sql.query(db, "SELECT window_name || '/' || window_partition FROM {schema}.durable_instances"
                + " WHERE id = $1", row -> row.get(0, String.class), waits)).containsExactly("narrow/q");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> Outcome.next("b", "").window("narrow", 1, "q").inline())
                .isInstanceOf(IllegalArgumentException.class);
    }
}
