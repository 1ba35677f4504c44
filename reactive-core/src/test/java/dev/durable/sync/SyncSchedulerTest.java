package dev.durable.sync;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.sync.SyncConfigException.Rule;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Hooks;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The timing, pacing, supervision, membership and metrics of the sync scheduler, on virtual time. */
class SyncSchedulerTest {

    private static final List<String> FOUR = List.of("0", "1", "2", "3");
    private static final Duration TEN = Duration.ofSeconds(10);

    private final List<Throwable> dropped = Collections.synchronizedList(new ArrayList<>());
    private final List<SyncTarget> calls = Collections.synchronizedList(new ArrayList<>());
    private final List<SyncScheduler> created = new ArrayList<>();
    private VirtualTimeScheduler vts;
    private SimpleMeterRegistry registry;

    @BeforeEach
    void setUp() {
        Hooks.onErrorDropped(dropped::add);
        vts = VirtualTimeScheduler.create();
        registry = new SimpleMeterRegistry();
    }

    @AfterEach
    void tearDown() {
        created.forEach(scheduler -> scheduler.shutdown().block());
        vts.dispose();
        Hooks.resetOnErrorDropped();
        assertThat(dropped).as("errors dropped by Reactor").isEmpty();
    }

    private SyncSchedulerConfig.Builder ringOfFour(String local) {
        return SyncSchedulerConfig.builder(local).nodes(FOUR).topology(SyncTopology.ring())
                .shardCount(2).interval(TEN).scheduler(vts).meterRegistry(registry);
    }

    private SyncPullTrigger recording() {
        return (partner, shard) -> {
            calls.add(new SyncTarget(partner, shard));
            return Mono.empty();
        };
    }

    private SyncScheduler create(SyncSchedulerConfig.Builder config, SyncPullTrigger trigger) {
        SyncScheduler scheduler = SyncScheduler.create(config.build(), trigger);
        created.add(scheduler);
        return scheduler;
    }

    private void advance(Duration by) {
        vts.advanceTimeBy(by);
    }

    private double count(String name, String... tags) {
        Counter counter = registry.find(name).tags(tags).counter();
        return counter == null ? 0 : counter.count();
    }

    private static SyncTarget target(String partner, int shard) {
        return new SyncTarget(partner, shard);
    }

    @Test
    void runOnceOnARingOfFourPullsEachPartnerAndShardInOrder() {
        SyncScheduler scheduler = create(ringOfFour("1"), recording());

        StepVerifier.create(scheduler.runOnce())
                .assertNext(stats -> {
                    assertThat(stats.partners()).isEqualTo(2);
                    assertThat(stats.shards()).isEqualTo(2);
                    assertThat(stats.operationsTriggered()).isEqualTo(4);
                    assertThat(stats.failed()).isZero();
                })
                .verifyComplete();
        assertThat(calls).containsExactly(target("0", 0), target("0", 1), target("2", 0), target("2", 1));
    }

    @Test
    void aFailingPullIsReportedWithItsPartnerAndShardAndTheOthersStillRun() {
        SyncScheduler scheduler = create(ringOfFour("1"), (partner, shard) -> {
            calls.add(target(partner, shard));
            if (partner.equals("0") && shard == 0) {
                return Mono.error(new IllegalStateException("partner 0 unreachable"));
            }
            if (partner.equals("2") && shard == 1) {
                throw new IllegalArgumentException("thrown, not signalled");
            }
            return Mono.empty();
        });

        SyncStats stats = scheduler.runOnce().block();

        assertThat(calls).hasSize(4);
        assertThat(stats.operationsTriggered()).isEqualTo(4);
        assertThat(stats.failed()).isEqualTo(2);
        assertThat(stats.succeeded()).isEqualTo(2);
        assertThat(stats.failures()).extracting(SyncPullException::partner, SyncPullException::shard)
                .containsExactlyInAnyOrder(org.assertj.core.groups.Tuple.tuple("0", 0),
                        org.assertj.core.groups.Tuple.tuple("2", 1));
        assertThat(stats.failures()).allSatisfy(failure -> assertThat(failure).hasMessageContaining("partner '"));

        // Nor does it stop the next tick.
        scheduler.start();
        advance(TEN);
        assertThat(calls).hasSize(8);
    }

    @Test
    void theFirstTickComesOneIntervalAfterStart() {
        SyncScheduler scheduler = create(ringOfFour("1"), recording());
        scheduler.start();

        advance(TEN.minusMillis(1));
        assertThat(calls).isEmpty();
        advance(Duration.ofMillis(1));
        assertThat(calls).hasSize(4);
        advance(TEN);
        assertThat(calls).hasSize(8);
        assertThat(scheduler.ticks()).isEqualTo(2);
    }

    @Test
    void theNextTickIsArmedWhenThePassEnds() {
        // One pull at a time, 3 s each: the pass of the tick at 10 s ends at 22 s.
        SyncScheduler scheduler = create(ringOfFour("1").maxConcurrency(1), (partner, shard) -> {
            calls.add(target(partner, shard));
            return Mono.delay(Duration.ofSeconds(3), vts).then();
        });
        scheduler.start();

        advance(TEN);
        assertThat(calls).hasSize(1);
        advance(Duration.ofSeconds(12));
        assertThat(calls).hasSize(4);
        advance(Duration.ofMillis(9_999));
        assertThat(calls).as("no tick before 10 s after the pass ended").hasSize(4);
        advance(Duration.ofMillis(1));
        assertThat(calls).hasSize(5);
        assertThat(count("durable.sync.skipped", "reason", "overlap")).isZero();
    }

    @Test
    void aTickDuringARunningPassIsSkippedAndARunOnceJoinsIt() {
        SyncScheduler scheduler = create(ringOfFour("1"), (partner, shard) -> {
            calls.add(target(partner, shard));
            return Mono.delay(Duration.ofSeconds(12), vts).then();
        });
        scheduler.start();
        List<SyncStats> first = new ArrayList<>();
        List<SyncStats> joined = new ArrayList<>();
        scheduler.runOnce().subscribe(first::add, dropped::add);
        assertThat(calls).containsExactly(target("0", 0), target("2", 0));

        advance(Duration.ofSeconds(5));
        scheduler.runOnce().subscribe(joined::add, dropped::add);
        advance(Duration.ofSeconds(20));

        // The manual pass ran 0..24 s; the ticks at 10 and 20 s found it running.
        assertThat(first).hasSize(1);
        assertThat(joined).containsExactlyElementsOf(first);
        assertThat(calls).hasSize(4);
        assertThat(count("durable.sync.skipped", "reason", "overlap")).isEqualTo(2);
        assertThat(count("durable.sync.skipped", "reason", "coalesced")).isEqualTo(1);
        advance(Duration.ofSeconds(5));
        assertThat(calls).as("the tick at 30 s runs").hasSize(6);
    }

    @Test
    void jitterShortensTheDelayByASeededRandomAmount() {
        long shortenBy = (long) (new Random(7).nextDouble() * TEN.toNanos());
        Duration expected = TEN.minusNanos(shortenBy);
        assertThat(expected).isLessThan(TEN);

        SyncScheduler scheduler = create(ringOfFour("1").jitter(TEN).random(new Random(7)), recording());
        scheduler.start();

        advance(expected.minusNanos(1));
        assertThat(calls).isEmpty();
        advance(Duration.ofNanos(1));
        assertThat(calls).hasSize(4);
    }

    @Test
    void aCrashedTickLoopIsRestarted() {
        SyncScheduler scheduler = create(ringOfFour("1"), recording());
        scheduler.start();
        advance(TEN);
        assertThat(calls).hasSize(4);

        scheduler.crashNextTickForTest(new IllegalStateException("simulated crash of the tick loop"));
        advance(TEN);
        assertThat(scheduler.restarts()).isEqualTo(1);
        assertThat(count("durable.sync.restarts")).isEqualTo(1);
        assertThat(calls).hasSize(4);

        // The restarted loop arms a fresh interval and ticks as before.
        advance(TEN);
        assertThat(calls).hasSize(8);
        advance(TEN);
        assertThat(calls).hasSize(12);
    }

    @Test
    void shutdownStopsTheTicksAndRefusesPasses() {
        SyncScheduler scheduler = create(ringOfFour("1"), recording());
        scheduler.start();
        List<SyncStats> passes = new ArrayList<>();
        AtomicBoolean completed = new AtomicBoolean();
        scheduler.passes().subscribe(passes::add, dropped::add, () -> completed.set(true));
        advance(TEN);
        assertThat(calls).hasSize(4);

        scheduler.shutdown().block();
        advance(Duration.ofMinutes(5));

        assertThat(calls).hasSize(4);
        assertThat(passes).hasSize(1);
        assertThat(completed).isTrue();
        StepVerifier.create(scheduler.runOnce()).verifyError(SyncSchedulerClosedException.class);
        scheduler.shutdown().block();
    }

    @Test
    void shutdownCutsARunningPassShort() {
        SyncScheduler scheduler = create(ringOfFour("1"), (partner, shard) -> Mono.never());
        StepVerifier.create(scheduler.runOnce())
                .then(() -> scheduler.shutdown().block())
                .verifyError(SyncSchedulerClosedException.class);
    }

    @Test
    void pullsAreBoundedPerPartnerAndInTotal() {
        AtomicInteger total = new AtomicInteger();
        AtomicInteger maxTotal = new AtomicInteger();
        Map<String, AtomicInteger> perPartner = new ConcurrentHashMap<>();
        AtomicInteger maxPerPartner = new AtomicInteger();
        SyncSchedulerConfig.Builder config = SyncSchedulerConfig.builder("0")
                .nodes(List.of("0", "1", "2", "3", "4")).topology(SyncTopology.fullMesh())
                .shardCount(4).interval(TEN).scheduler(vts).meterRegistry(registry)
                .maxConcurrency(4).maxConcurrencyPerPartner(2);
        SyncScheduler scheduler = create(config, (partner, shard) -> Mono.defer(() -> {
            calls.add(target(partner, shard));
            maxTotal.accumulateAndGet(total.incrementAndGet(), Math::max);
            AtomicInteger mine = perPartner.computeIfAbsent(partner, key -> new AtomicInteger());
            maxPerPartner.accumulateAndGet(mine.incrementAndGet(), Math::max);
            return Mono.delay(Duration.ofSeconds(1), vts).then(Mono.fromRunnable(() -> {
                total.decrementAndGet();
                mine.decrementAndGet();
            }));
        }));

        List<SyncStats> stats = new ArrayList<>();
        scheduler.runOnce().subscribe(stats::add, dropped::add);
        assertThat(total.get()).as("in flight at once, not one burst of 16").isEqualTo(4);
        advance(Duration.ofSeconds(30));

        assertThat(stats).singleElement().satisfies(s -> {
            assertThat(s.partners()).isEqualTo(4);
            assertThat(s.operationsTriggered()).isEqualTo(16);
        });
        assertThat(calls).hasSize(16);
        assertThat(maxTotal.get()).isEqualTo(4);
        assertThat(maxPerPartner.get()).isEqualTo(2);
    }

    @Test
    void aPartnerThatKeepsFailingIsBackedOffExponentiallyAndResetOnSuccess() {
        AtomicBoolean partnerZeroDown = new AtomicBoolean(true);
        List<Long> ticksCallingZero = new ArrayList<>();
        List<SyncStats> passes = new ArrayList<>();
        SyncScheduler scheduler = create(ringOfFour("1").shardCount(1).maxBackoffTicks(4), (partner, shard) -> {
            calls.add(target(partner, shard));
            if (partner.equals("0")) {
                ticksCallingZero.add(vts.now(java.util.concurrent.TimeUnit.SECONDS) / 10 - 1);
                return partnerZeroDown.get() ? Mono.error(new IllegalStateException("down")) : Mono.empty();
            }
            return Mono.empty();
        });
        scheduler.passes().subscribe(passes::add, dropped::add);
        scheduler.start();

        advance(TEN.multipliedBy(15));
        // Fails at tick 0, sits out 1; fails at 2, sits out 2; at 5, sits out 4; at 10, 4 (the cap).
        assertThat(ticksCallingZero).containsExactly(0L, 2L, 5L, 10L);
        assertThat(calls.stream().filter(call -> call.partner().equals("2"))).hasSize(15);
        assertThat(count("durable.sync.skipped", "reason", "backoff")).isEqualTo(11);
        assertThat(passes.get(1).backedOff()).isEqualTo(1);
        assertThat(passes.get(1).partners()).isEqualTo(2);
        assertThat(passes.get(1).operationsTriggered()).isEqualTo(1);

        partnerZeroDown.set(false);
        advance(TEN.multipliedBy(3));
        assertThat(ticksCallingZero).containsExactly(0L, 2L, 5L, 10L, 15L, 16L, 17L);
    }

    @Test
    void membershipChangesAreUsedAtEachTickAndATickWithoutTheLocalNodeIsSkipped() {
        Sinks.Many<Set<String>> membership = Sinks.many().replay().latest();
        SyncSchedulerConfig.Builder config = SyncSchedulerConfig.builder("a")
                .membership(membership.asFlux()).topology(SyncTopology.ring()).shardCount(1)
                .interval(TEN).scheduler(vts).meterRegistry(registry);
        SyncScheduler scheduler = create(config, recording());
        StepVerifier.create(scheduler.runOnce())
                .verifyErrorSatisfies(error -> assertThat(error).isInstanceOfSatisfying(SyncConfigException.class,
                        broken -> assertThat(broken.rule()).isEqualTo(Rule.NO_NODE_SET)));
        scheduler.start();

        advance(TEN);
        assertThat(count("durable.sync.skipped", "reason", "no-node-set")).isEqualTo(1);

        membership.tryEmitNext(Set.of("b", "c"));
        advance(TEN);
        assertThat(count("durable.sync.skipped", "reason", "local-node-not-in-set")).isEqualTo(1);
        assertThat(calls).isEmpty();

        membership.tryEmitNext(Set.of("d", "c", "a", "b"));
        advance(TEN);
        assertThat(calls).containsExactly(target("b", 0), target("d", 0));

        membership.tryEmitNext(Set.of("c", "a"));
        advance(TEN);
        assertThat(calls).containsExactly(target("b", 0), target("d", 0), target("c", 0));
        assertThat(scheduler.ticks()).isEqualTo(4);
    }

    @Test
    void customPairsToNodesThatLeftAreIdleUnderMembership() {
        Sinks.Many<Set<String>> membership = Sinks.many().replay().latest();
        membership.tryEmitNext(Set.of("a", "b"));
        SyncSchedulerConfig.Builder config = SyncSchedulerConfig.builder("a")
                .membership(membership.asFlux())
                .topology(SyncTopology.custom(NodePair.of("a", "b"), NodePair.of("a", "c")))
                .shardCount(1).interval(TEN).scheduler(vts);
        SyncScheduler scheduler = create(config, recording());

        assertThat(scheduler.runOnce().block().partners()).isEqualTo(1);
        assertThat(calls).containsExactly(target("b", 0));
    }

    @Test
    void metricsCountTicksPullsAndPassesAndTrackTheLastSuccess() {
        SyncScheduler scheduler = create(ringOfFour("1"), (partner, shard) -> partner.equals("0") && shard == 1
                ? Mono.error(new IllegalStateException("shard 1 of partner 0 is busy"))
                : Mono.empty());
        scheduler.start();
        advance(TEN);

        assertThat(count("durable.sync.ticks")).isEqualTo(1);
        assertThat(count("durable.sync.pulls", "outcome", "success", "partner", "0")).isEqualTo(1);
        assertThat(count("durable.sync.pulls", "outcome", "failure", "partner", "0")).isEqualTo(1);
        assertThat(count("durable.sync.pulls", "outcome", "success", "partner", "2")).isEqualTo(2);
        Timer pass = registry.find("durable.sync.pass").tags("kind", "tick").timer();
        assertThat(pass).isNotNull();
        assertThat(pass.count()).isEqualTo(1);
        assertThat(scheduler.lastSuccess("2", 0)).contains(Instant.ofEpochMilli(10_000));
        assertThat(scheduler.lastSuccess("0", 1)).isEmpty();
        assertThat(scheduler.lastSuccesses()).containsOnlyKeys(target("0", 0), target("2", 0), target("2", 1));

        advance(TEN);
        assertThat(count("durable.sync.ticks")).isEqualTo(2);
        assertThat(scheduler.lastSuccess("2", 0)).contains(Instant.ofEpochMilli(20_000));
        scheduler.shutdown().block();
        advance(Duration.ofSeconds(5));
        Gauge lag = registry.find("durable.sync.lag").tags("partner", "2").gauge();
        assertThat(lag).isNotNull();
        assertThat(lag.value()).isEqualTo(5.0);
    }

    @Test
    void aShardSourceNarrowsThePassAndItsFailureEndsOnlyThatTick() {
        AtomicBoolean sourceFails = new AtomicBoolean();
        ShardSource source = shardCount -> sourceFails.get()
                ? reactor.core.publisher.Flux.error(new IllegalStateException("shard map unavailable"))
                : reactor.core.publisher.Flux.just(3, 1, 1, 7, -1);
        SyncScheduler scheduler = create(ringOfFour("1").shardCount(4).shardSource(source), recording());

        SyncStats stats = scheduler.runOnce().block();
        assertThat(stats.shards()).isEqualTo(2);
        assertThat(calls).containsExactly(target("0", 1), target("0", 3), target("2", 1), target("2", 3));

        sourceFails.set(true);
        StepVerifier.create(scheduler.runOnce()).verifyErrorMessage("shard map unavailable");
        scheduler.start();
        advance(TEN);
        assertThat(count("durable.sync.skipped", "reason", "pass-failed")).isEqualTo(1);
        sourceFails.set(false);
        advance(TEN);
        assertThat(calls).hasSize(8);
        assertThat(scheduler.restarts()).isZero();
    }

    @Test
    void aPullThatDoesNotCompleteTimesOutAsAFailure() {
        SyncScheduler scheduler = create(ringOfFour("1").pullTimeout(Duration.ofSeconds(5)),
                (partner, shard) -> partner.equals("2") ? Mono.never() : Mono.empty());
        List<SyncStats> stats = new ArrayList<>();
        scheduler.runOnce().subscribe(stats::add, dropped::add);
        assertThat(stats).isEmpty();

        advance(Duration.ofSeconds(10));

        assertThat(stats).singleElement().satisfies(s -> {
            assertThat(s.failed()).isEqualTo(2);
            assertThat(s.failures()).allSatisfy(failure -> {
                assertThat(failure.partner()).isEqualTo("2");
                assertThat(failure.getCause()).isInstanceOf(TimeoutException.class);
            });
        });
    }

    @Test
    void passesEmitEachPassOnVirtualTime() {
        StepVerifier.withVirtualTime(() -> {
                    // Built inside the supplier, so the default scheduler is the virtual one.
                    SyncScheduler scheduler = SyncScheduler.create(SyncSchedulerConfig.builder("1")
                            .nodes(FOUR).topology(SyncTopology.fullMesh()).shardCount(3).interval(TEN)
                            .build(), SyncPullTrigger.noop());
                    created.add(scheduler);
                    scheduler.start();
                    return scheduler.passes().take(2);
                })
                .expectSubscription()
                .expectNoEvent(TEN.minusMillis(1))
                .thenAwait(Duration.ofMillis(1))
                .assertNext(stats -> assertThat(stats.operationsTriggered()).isEqualTo(9))
                .expectNoEvent(TEN.minusMillis(1))
                .thenAwait(Duration.ofMillis(1))
                .assertNext(stats -> assertThat(stats.partners()).isEqualTo(3))
                .verifyComplete();
    }
}
