package dev.durable.limit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import dev.durable.support.Eventually;
import dev.durable.support.ExecutingSampler;
import dev.durable.support.RateWindows;
import dev.durable.support.Sql;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The limiter contract's gates and buckets ({@link LimiterContract}): engines sharing a gate never
 * run more than its capacity, a bucket never admits more than its rate, a saturated limit starves
 * no other work, inline steps keep their gate slot and draw their tokens.
 */
public abstract class LimitsContract extends LimiterContract {

    /**
     * A job that counts how many run at once per key (its argument up to '#') and how often each
     * argument ran. The handler's work ends before it emits: a finally hook could run after the
     * engine had committed, given the slot back and another engine started the next holder.
     */
    protected static JobDefinition<String, String> tracked(String type, String queue, Map<String, AtomicInteger> active,
            Map<String, AtomicInteger> maxActive, Map<String, AtomicInteger> runs, Duration hold) {
        return JobDefinition.of(type, String.class, (String arg) -> Mono.defer(() -> {
                    runs.computeIfAbsent(arg, k -> new AtomicInteger()).incrementAndGet();
                    String key = arg.substring(0, arg.indexOf('#'));
                    int now = active.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                    maxActive.computeIfAbsent(key, k -> new AtomicInteger()).accumulateAndGet(now, Math::max);
                    return Mono.delay(hold).map(tick -> {
                        active.get(key).decrementAndGet();
                        return arg;
                    });
                }))
                .queue(queue);
    }

    /** A job's argument (its state, a JSON string) matches {@code pattern}: what a settled row still tells. */
    protected static String argLike(String pattern) {
        return "state #>> '{}' LIKE '" + pattern + "'";
    }

    @Test
    void aGateNeverAdmitsMoreThanItsCapacityAcrossEngines() throws Exception {
        Map<String, AtomicInteger> active = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> maxActive = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
        JobDefinition<String, String> job = tracked("gated", "gates", active, maxActive, runs, Duration.ofMillis(15));
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            nodes.add(engines.start(options("gate" + n).gate("api", 3).gate("tenant", 4, 2)
                    .queue(QueueOptions.builder("gates").concurrency(6).prefetch(4)
                            .pollInterval(Duration.ofMillis(50)).build()), job));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            requests.add(i % 3 == 0 ? JobRequest.of("gated", "api#" + i).gate("api")
                    : JobRequest.of("gated", "tenant-" + (i % 3) + "#" + i).gate("tenant", "t" + (i % 3)));
        }
        try (ExecutingSampler api = new ExecutingSampler(db, "gate_name = 'api'");
                ExecutingSampler t1 = new ExecutingSampler(db, "gate_name = 'tenant' AND concurrency_key = 't1'")) {
            nodes.get(2).insertAll(requests).block(WAIT);
            Eventually.until("all gated jobs done", WAIT, () -> Sql.count(db, "queue = 'gates' AND status = 'done'") == 300);
            api.close();
            t1.close();
            assertThat(api.samples()).isGreaterThan(10);
            assertThat(api.max()).isBetween(1L, 3L);
            assertThat(t1.max()).isBetween(1L, 4L);
        }
        assertThat(maxActive.get("api").get()).isBetween(1, 3);
        assertThat(maxActive.get("tenant-1").get()).isBetween(1, 4);
        assertThat(maxActive.get("tenant-2").get()).isBetween(1, 4);
        assertThat(runs).hasSize(300).allSatisfy((arg, n) -> assertThat(n.get()).as(arg).isEqualTo(1));
        // Every engine's limits held rows back, and a held-back row was never claimed.
        long throttled = nodes.stream().mapToLong(node -> node.queueStats().get(0).throttled()).sum();
        assertThat(throttled).isPositive();
        assertThat(Sql.count(db, "queue = 'gates' AND attempt <> 1")).isZero();
        // Every slot was given back.
        Eventually.until("every gate slot given back", WAIT, () -> limiter().heldSlots("api", "") == 0
                && limiter().heldSlots("tenant", "t1") == 0 && limiter().heldSlots("tenant", "t2") == 0);
    }

    @Test
    void aRateLimitIsNeverExceededOverAnyWindow() {
        List<Long> starts = Collections.synchronizedList(new ArrayList<>());
        JobDefinition<String, String> job = JobDefinition.of("limited", String.class, (String s) -> {
            starts.add(System.nanoTime());
            return Mono.just(s);
        }).queue("rates");
        DurableEngine producer = null;
        for (int n = 0; n < 3; n++) {
            producer = engines.start(options("rate" + n).rateLimit("partner-api", 20, 5)
                    .queue(QueueOptions.builder("rates").concurrency(10).pollInterval(Duration.ofMillis(20))
                            .maxPollInterval(Duration.ofMillis(20)).build()), job);
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            requests.add(JobRequest.of("limited", "r" + i).rateLimit("partner-api"));
        }
        producer.insertAll(requests).block(WAIT);
        Eventually.until("all limited jobs done", WAIT, () -> Sql.count(db, "queue = 'rates' AND status = 'done'") == 60);

        assertThat(starts).hasSize(60);
        // 250 ms of slack between an admission and its handler starting: on a loaded machine a delayed
        // start can bunch up with the next; an unlimited queue would start all 60 at once.
        RateWindows.assertWithinBucket(starts, 5, 20, 0.25);
    }

    @Test
    void aSaturatedLimitDoesNotStarveOtherWorkInTheQueue() {
        JobDefinition<String, String> job = JobDefinition.of("any", String.class, (String s) -> Mono.just(s))
                .queue("mixed");
        engines.start(options("mixed").rateLimit("slow", 1, 1).gate("narrow", 1)
                .queue(QueueOptions.builder("mixed").concurrency(4).pollInterval(Duration.ofMillis(50)).build()), job);
        DurableEngine producer = engines.start(options("mixed-producer").rateLimit("slow", 1, 1).gate("narrow", 1), job);
        List<JobRequest> throttled = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            throttled.add(JobRequest.of("any", "slow" + i).rateLimit("slow").priority(-1));
            throttled.add(JobRequest.of("any", "narrow" + i).gate("narrow").priority(-1));
        }
        producer.insertAll(throttled).block(WAIT);
        List<JobRequest> free = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            free.add(JobRequest.of("any", "free" + i));
        }
        producer.insertAll(free).block(WAIT);
        // The throttled rows are more urgent and far more numerous, yet the free ones all run.
        Eventually.until("unrelated work done", Duration.ofSeconds(20),
                () -> Sql.count(db, "queue = 'mixed' AND " + argLike("free%") + " AND status = 'done'") == 100);
        assertThat(Sql.count(db, "queue = 'mixed' AND " + argLike("slow%") + " AND status = 'done'")).isLessThan(50);
    }

    @Test
    void unknownLimitsAndWeightsAboveBurstAreRefused() {
        DurableEngine engine = engines.start(options("strict").rateLimit("api", 10, 3).gate("g", 2),
                JobDefinition.of("any", String.class, (String s) -> Mono.just(s)));
        assertThatThrownBy(() -> engine.insert(JobRequest.of("any", "x").gate("nope")).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("unknown gate 'nope'");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("any", "x").rateLimit("nope")).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("unknown rate limit 'nope'");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("any", "x").rateLimit("api", 4, null)).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessage("weight of rate limit api must be 1 to its burst 3, was 4");
        assertThatThrownBy(() -> EngineOptions.builder().gate("g", 0))
                .hasMessage("capacity of gate g must be at least 1, was 0");
        assertThatThrownBy(() -> EngineOptions.builder().gate("g", 2, 3))
                .hasMessageContaining("shards of gate g must not exceed its capacity");
        assertThatThrownBy(() -> EngineOptions.builder().rateLimit("r", 0, 1))
                .hasMessageContaining("rate of rate limit r must be positive");
        assertThatThrownBy(() -> Outcome.next("s", "x").inline().gate("g", "k"))
                .hasMessageContaining("cannot be inline");
    }

    @Test
    void inlineStepsKeepTheirSlotThroughRenewalsAndGiveItBackWhenTheyLeaveTheGate() {
        Sinks.Empty<Void> holdB = Sinks.empty();
        Sinks.Empty<Void> holdC = Sinks.empty();
        AtomicInteger inB = new AtomicInteger();
        AtomicInteger inC = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("chain", String.class).queue("inline")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.defer(() -> {
                    inB.incrementAndGet();
                    return holdB.asMono().thenReturn(Outcome.next("c", ctx.state() + "b").inline().releaseConcurrencyKey());
                }))
                .step("c", ctx -> Mono.defer(() -> {
                    inC.incrementAndGet();
                    return holdC.asMono().thenReturn(Outcome.<String>done(ctx.state() + "c"));
                }))
                .build();
        JobDefinition<String, String> gated = JobDefinition.of("gated-next", String.class, (String s) -> Mono.just(s))
                .queue("inline");
        DurableEngine engine = engines.build(options("inline").gate("one", 1)
                .queue(QueueOptions.builder("inline").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), gated);
        DurableEngine withChain = DurableEngine.builder(options("inline-chain").gate("one", 1)
                .queue(QueueOptions.builder("inline").pollInterval(Duration.ofMillis(50)).build())
                .build()).register(chain).register(gated).build();
        try {
            withChain.start().block(WAIT);
            long id = withChain.insert(JobRequest.of("chain", "").gate("one", "g")).block(WAIT);
            Eventually.until("in step b", WAIT, () -> inB.get() == 1);
            // Started only now: it knows no chain, so it must not pick the chain's row.
            engine.start().block(WAIT);
            long waiting = engine.insert(JobRequest.of("gated-next", "w").gate("one", "g")).block(WAIT);
            // Longer than a limiter's 3.5 s slot TTL (lease and a beat): a slot that expires unless
            // renewed is kept by the heartbeat's renewals only.
            Eventually.sleep(4500);
            assertThat(engine.get(waiting).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
            holdB.tryEmitEmpty();
            Eventually.until("in step c", WAIT, () -> inC.get() == 1);
            // Step c released its key, so it left the gate: the slot went back while c still runs.
            engines.awaitStatus(engine, waiting, InstanceStatus.DONE, Duration.ofSeconds(10));
            assertThat(withChain.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.EXECUTING);
            holdC.tryEmitEmpty();
            engines.awaitStatus(withChain, id, InstanceStatus.DONE, WAIT);
        } finally {
            holdB.tryEmitEmpty();
            holdC.tryEmitEmpty();
            withChain.closeLater().block(WAIT);
        }
    }

    @Test
    void anInlineStepDrawsItsTokensAndGoesThroughTheQueueWhenTheBucketIsEmpty() {
        AtomicInteger secondSteps = new AtomicInteger();
        WorkflowDefinition<String> chain = WorkflowDefinition.builder("trickle", String.class).queue("trickle")
                .step("a", ctx -> Mono.just(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.fromSupplier(() -> {
                    secondSteps.incrementAndGet();
                    return Outcome.<String>done(ctx.state() + "b");
                }))
                .build();
        io.micrometer.core.instrument.simple.SimpleMeterRegistry meters =
                new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
        DurableEngine engine = engines.start(options("trickle").meterRegistry(meters)
                .rateLimit("trickle", TRICKLE, 1).gate("solo", 1)
                .queue(QueueOptions.builder("trickle").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(100)).build()), chain);
        long id = engine.insert(JobRequest.of("trickle", "").rateLimit("trickle").gate("solo", "k")).block(WAIT);

        // The pick's admission took the bucket's only token; the inline step found it empty.
        Eventually.until("step b back in the queue", WAIT, () -> engine.get(id).block(WAIT),
                instance -> instance.status() == InstanceStatus.RUNNABLE && "b".equals(instance.step()));
        assertThat(secondSteps.get()).isZero();
        // Back in the queue, the row is held back at each pick: by its bucket where the limiter knows
        // which limit refused it, else counted as held by its gate (a limiter outside the database
        // does not say which limit refused a claim with both).
        String held = limiter().inDatabase() ? "rate" : "gate";
        Eventually.until("the refusal counted", WAIT, () -> {
            var counter = meters.find("durable.throttled").tag("queue", "trickle").tag("limit", held)
                    .functionCounter();
            return counter != null && counter.count() > 0;
        });
        assertThat(secondSteps.get()).isZero();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
    }
}
