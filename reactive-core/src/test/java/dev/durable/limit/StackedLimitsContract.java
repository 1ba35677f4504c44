package dev.durable.limit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.ConflictPolicy;
import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.WorkflowDefinition;
import dev.durable.admin.LimitUsage;
import dev.durable.admin.WindowUsage;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The limiter contract's stacked limits ({@link LimiterContract}, issue 21): a row's gate, bucket and
 * sliding window are admitted all or nothing, none spent on a row another refuses; inline steps
 * draw their bucket and window together; a transition moves its next step's window.
 */
public abstract class StackedLimitsContract extends LimiterContract {

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
        DurableEngine engine = engines.start(options("stacked").gate("narrow", 1)
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
        double untouched = limiter().tokens("budget", "");
        assertThat(Double.isNaN(untouched) || untouched > 5.99).as("tokens " + untouched).isTrue();

        release.tryEmitValue(true);
        assertThat(engines.awaitSettled(engine, holder, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // One at a time through the gate, each spending only its own token: the whole budget of six runs.
        Eventually.until("all six done", WAIT, () -> Sql.count(db, "queue = 'stacked' AND status = 'done'") == 7);
        assertThat(Sql.count(db, "queue = 'stacked' AND status = 'runnable'")).isZero();
        assertThat(limiter().tokens("budget", "")).isLessThan(0.5);
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
        DurableEngine engine = engines.start(options("windowed").gate("one", 1)
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
        DurableEngine engine = engines.start(options("wchain").window("twice", 2, Duration.ofHours(1))
                .queue(queue("wchain")), chain);
        long id = engine.insert(JobRequest.of("window-chain", "").window("twice", 1, "p")).block(WAIT);
        // The pick took one for step a, step b drew the second, step c found the window full.
        Eventually.until("step c back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "c".equals(instance.step()));
        long picks = engine.queueStats("wchain").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("wchain").orElseThrow().picks() >= picks + 3);
        assertThat(thirdSteps.get()).isZero();
        assertThat(limiter().windowCount("twice", "p")).isEqualTo(2);
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
        DurableEngine engine = engines.start(options("slotless").gate("two", 2)
                .rateLimit("once", TRICKLE, 1).queue(queue("slotless")), job);
        engine.insertAll(List.of(JobRequest.of("slotless", "a").gate("two", "k").rateLimit("once"),
                JobRequest.of("slotless", "b").gate("two", "k").rateLimit("once"))).block(WAIT);
        Eventually.until("one running", WAIT, () -> running.get() == 1);
        long picks = engine.queueStats("slotless").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("slotless").orElseThrow().picks() >= picks + 5);
        // The second row's bucket was empty: it holds no slot, so one of the two is still free.
        assertThat(running.get()).isEqualTo(1);
        quiesce(engine, "slotless");
        assertThat(limiter().heldSlots("two", "k")).isEqualTo(1);
        assertThat(engine.limits().tryAcquire("two", "k", 1).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("two", "k", 1).block(WAIT)).isEmpty();
        release.tryEmitValue(true);
    }

    private static JobDefinition<String, String> echo(String type) {
        return JobDefinition.of(type, String.class, (String s) -> Mono.just(s)).queue(type);
    }

    /** A global gate, a per-tenant bucket and a per-tenant hourly window: the tenant is the type (one per test). */
    private static JobRequest stacked(String type, String arg) {
        return JobRequest.of(type, arg).gate("global", type).rateLimit("per-tenant", type).window("per-hour", type);
    }

    @Test
    void aRowItsWindowRefusesTakesNoTokenAndNoSlot() {
        DurableEngine engine = engines.start(options("wfull").gate("global", 2)
                .rateLimit("per-tenant", TRICKLE, 5).window("per-hour", 1, Duration.ofHours(1))
                .queue(queue("wfull")), echo("wfull"));
        long first = engine.insert(stacked("wfull", "first")).block(WAIT);
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        engine.insertAll(List.of(stacked("wfull", "a"), stacked("wfull", "b"), stacked("wfull", "c"))).block(WAIT);
        long picks = engine.queueStats("wfull").orElseThrow().picks();
        Eventually.until("several picks with the window full", WAIT,
                () -> engine.queueStats("wfull").orElseThrow().picks() >= picks + 5);
        assertThat(Sql.count(db, "queue = 'wfull' AND status = 'runnable'")).isEqualTo(3);
        quiesce(engine, "wfull");
        // The window refused them: the bucket kept its four tokens, the window its one count, the gate its slots.
        assertThat(limiter().tokens("per-tenant", "wfull")).isGreaterThan(3.99);
        assertThat(limiter().windowCount("per-hour", "wfull")).isEqualTo(1);
        assertThat(engine.limits().tryAcquire("global", "wfull", 2).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("per-tenant", "wfull", 4).block(WAIT)).isPresent();
    }

    @Test
    void aRowItsBucketRefusesTakesNoWindowCountAndTheTighterLimitAdmits() {
        DurableEngine engine = engines.start(options("bempty").gate("global", 4)
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
        // The bucket (3) is the tighter limit: three ran, and the window counted those three only
        // (a count a limiter took for a refused row went back).
        assertThat(Sql.count(db, "queue = 'bempty' AND status = 'done'")).isEqualTo(3);
        quiesce(engine, "bempty");
        assertThat(limiter().windowCount("per-hour", "bempty")).isEqualTo(3);
        // admin().limits() shows the window's partition with what it counted, when the windows are in
        // the database; a limiter elsewhere keeps them (and admin says so).
        LimitUsage usage = engine.admin().limits().block(WAIT);
        assertThat(usage.bucketsInLimiter()).isEqualTo(!limiter().inDatabase());
        if (limiter().inDatabase()) {
            assertThat(usage.windows()).contains(new WindowUsage("per-hour", "bempty", 3, 5));
        } else {
            assertThat(usage.windows()).isEmpty();
        }
        assertThat(engine.limits().tryAcquire("per-hour", "bempty", 2).block(WAIT)).isPresent();
        assertThat(engine.limits().tryAcquire("per-hour", "bempty", 1).block(WAIT)).isEmpty();
        assertThat(engine.limits().tryAcquire("global", "bempty", 4).block(WAIT)).isPresent();
    }

    @Test
    void theWindowIsTheTighterLimitAndSettledAndReplayedRowsKeepBothLimits() {
        DurableEngine engine = engines.start(options("wtight").gate("global", 4)
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
        assertThat(limiter().windowCount("per-hour", "wtight")).isEqualTo(2);
        long more = engine.insert(stacked("wtight", "more")).block(WAIT);
        long picks = engine.queueStats("wtight").orElseThrow().picks();
        Eventually.until("several picks with the window full", WAIT,
                () -> engine.queueStats("wtight").orElseThrow().picks() >= picks + 5);
        assertThat(Sql.count(db, "id = " + more + " AND status = 'runnable'")).isEqualTo(1);
        // Two runs through the window: two tokens of six spent, none for the refused row.
        assertThat(limiter().tokens("per-tenant", "wtight")).isBetween(3.99, 4.01);
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
        DurableEngine engine = engines.start(options("schain").rateLimit("per-tenant", TRICKLE, 10)
                .window("per-hour", 2, Duration.ofHours(1)).queue(queue("schain")), chain);
        long id = engine.insert(JobRequest.of("stacked-chain", "").rateLimit("per-tenant", "schain")
                .window("per-hour", "schain")).block(WAIT);
        // The pick took a token and a count for step a, step b drew both, step c found the window full.
        Eventually.until("step c back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "c".equals(instance.step()));
        long picks = engine.queueStats("schain").orElseThrow().picks();
        Eventually.until("more picks", WAIT, () -> engine.queueStats("schain").orElseThrow().picks() >= picks + 3);
        assertThat(thirdSteps.get()).isZero();
        assertThat(limiter().windowCount("per-hour", "schain")).isEqualTo(2);
        // Two tokens: step c's refused draws took none.
        assertThat(limiter().tokens("per-tenant", "schain")).isBetween(7.99, 8.01);
        assertThat(engine.limits().tryAcquire("per-hour", "schain", 1).block(WAIT)).isEmpty();
        assertThat(engine.limits().tryAcquire("per-tenant", "schain", 8).block(WAIT)).isPresent();
    }

    @Test
    void aFollowUpKeepsItsRequestsBucketAndWindow() {
        Sinks.One<Boolean> release = Sinks.one();
        AtomicInteger running = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("sfollow", String.class, (String s) -> {
            running.incrementAndGet();
            return s.equals("first") ? release.asMono().thenReturn(s) : Mono.just(s);
        }).queue("sfollow");
        DurableEngine engine = engines.start(options("sfollow").gate("global", 4)
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
        assertThat(limiter().windowCount("per-hour", "sfollow")).isEqualTo(2);
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
        DurableEngine engine = engines.start(options("wmove").window("once", 1, Duration.ofHours(1))
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
