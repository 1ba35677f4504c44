package dev.durable.limit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.EngineClosedException;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Maintenance;
import dev.durable.admin.GateUsage;
import dev.durable.support.Eventually;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

/**
 * The limiter contract's permits ({@link LimiterContract}, issue 21): {@code engine.limits()} outside
 * jobs, from the same gates, buckets and windows as the jobs, waited for without blocking, leased,
 * renewed and released, and shown by {@code admin().limits()}.
 */
public abstract class PermitsContract extends LimiterContract {

    /** The limits of every case here: two gates (one sharded), a bucket and two windows. */
    protected DurableEngine engine(String name, JobDefinition<?, ?>... jobs) {
        return engines.start(options(name).gate("api", 2).gate("wide", 6, 3).rateLimit("quota", TRICKLE, 3)
                .window("hourly", 5, Duration.ofHours(1)).window("brief", 2, Duration.ofMillis(400))
                .queue(queue(name)), jobs);
    }

    @Test
    void gatePermitsAndJobsShareTheGateAndTheAdminSeesThePermits() {
        AtomicInteger ran = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("shared", String.class, (String s) -> {
            ran.incrementAndGet();
            return Mono.just(s);
        }).queue("permits");
        DurableEngine engine = engine("permits", job);
        EngineLimits limits = engine.limits();

        Permit first = limits.tryAcquire("api", "tenant-1", 1).block(WAIT).orElseThrow();
        Permit second = limits.tryAcquire("api", "tenant-1", 1).block(WAIT).orElseThrow();
        assertThat(limits.tryAcquire("api", "tenant-1", 1).block(WAIT)).isEmpty();
        // Another key of the same gate has its own slots.
        assertThat(limits.tryAcquire("api", "tenant-2", 2).block(WAIT)).isPresent();
        assertThat(first.holdsSlots()).isTrue();

        assertThat(engine.admin().limits().block(WAIT).gates()).contains(new GateUsage("api", "tenant-1", 2, 2));

        // A job of the same gate and key waits for a permit to go.
        long id = engine.insert(JobRequest.of("shared", "x").gate("api", "tenant-1")).block(WAIT);
        long picks = engine.queueStats("permits").orElseThrow().picks();
        Eventually.until("a few picks", WAIT, () -> engine.queueStats("permits").orElseThrow().picks() >= picks + 3);
        assertThat(ran.get()).isZero();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);

        first.release().block(WAIT);
        first.release().block(WAIT); // idempotent: the other permit's slot stays held
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // The job gave its slot back; the second permit still holds one of the two.
        Eventually.until("the job's slot given back", WAIT, () -> limiter().heldSlots("api", "tenant-1") == 1);
        Permit third = limits.tryAcquire("api", "tenant-1", 1).block(WAIT).orElseThrow();
        assertThat(limits.tryAcquire("api", "tenant-1", 1).block(WAIT)).isEmpty();
        second.release().then(third.release()).block(WAIT);
        assertThat(limiter().heldSlots("api", "tenant-1")).isZero();
        limits.tryAcquire("api", "tenant-1", 2).block(WAIT).orElseThrow().release().block(WAIT);
    }

    /**
     * admin().limits() counts the permits a limiter holds beside the executing rows the database
     * shows. The case's gates are its own (admin lists every gate the database shows held, the other
     * cases' permits included).
     */
    @Test
    void adminLimitsShowThePermitSlotsBesideTheJobs() {
        Sinks.Empty<Void> release = Sinks.empty();
        AtomicInteger running = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("admin-held", String.class, (String s) -> {
            running.incrementAndGet();
            return release.asMono().thenReturn(s);
        }).queue("admin");
        DurableEngine engine = engines.start(options("admin").gate("admin-api", 2).gate("admin-wide", 6, 3)
                .queue(queue("admin")), job);
        EngineLimits limits = engine.limits();
        Permit pair = limits.tryAcquire("admin-api", "t1", 2).block(WAIT).orElseThrow();
        Permit shared = limits.tryAcquire("admin-api", "t2", 1).block(WAIT).orElseThrow();
        Permit wide = limits.tryAcquire("admin-wide", "k", 2).block(WAIT).orElseThrow();
        Permit wider = limits.tryAcquire("admin-wide", "k", 1).block(WAIT).orElseThrow();
        limits.tryAcquire("admin-api", "brief", 1, Duration.ofMillis(300)).block(WAIT).orElseThrow();
        long id = engine.insert(JobRequest.of("admin-held", "x").gate("admin-api", "t2")).block(WAIT);
        Eventually.until("the job holding t2's other slot", WAIT, () -> running.get() == 1);

        // Over the wide gate's shards; the short lease gone once it ends; the job's row and t2's permit summed.
        List<GateUsage> usage = Eventually.until("the brief permit's lease over", WAIT, () -> adminGates(engine),
                seen -> seen.stream().noneMatch(gate -> gate.key().equals("brief")));
        assertThat(usage).contains(new GateUsage("admin-api", "t1", 2, 2),
                new GateUsage("admin-api", "t2", 2, 2), new GateUsage("admin-wide", "k", 3, 6));

        pair.release().then(wide.release()).block(WAIT);
        release.tryEmitEmpty();
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(adminGates(engine)).containsExactlyInAnyOrder(
                new GateUsage("admin-api", "t2", 1, 2), new GateUsage("admin-wide", "k", 1, 6));
        shared.release().then(wider.release()).block(WAIT);
        assertThat(adminGates(engine)).isEmpty();
    }

    /** What admin().limits() shows of the gates of {@link #adminLimitsShowThePermitSlotsBesideTheJobs}. */
    private static List<GateUsage> adminGates(DurableEngine engine) {
        return engine.admin().limits().block(WAIT).gates().stream().filter(gate -> gate.gate().startsWith("admin-"))
                .toList();
    }

    @Test
    void acquireWaitsForAReleaseAndTimesOutWhenNoneComes() {
        DurableEngine engine = engine("waits");
        EngineLimits limits = engine.limits();
        Permit a = limits.tryAcquire("api", "k", 2).block(WAIT).orElseThrow();

        StepVerifier.create(limits.acquire("api", "k", 1, Duration.ofMillis(300), Duration.ofSeconds(30)))
                .expectError(PermitTimeoutException.class)
                .verify(WAIT);

        Mono<Permit> waiting = limits.acquire("api", "k", 1, WAIT, Duration.ofSeconds(30)).cache();
        waiting.subscribe(null, error -> { });
        a.release().delaySubscription(Duration.ofMillis(200)).block(WAIT);
        Permit granted = waiting.block(WAIT);
        assertThat(granted.limit()).isEqualTo("api");
        assertThat(granted.weight()).isEqualTo(1);
        granted.release().block(WAIT);
    }

    @Test
    void aPermitWhoseLeaseEndedFreesItsSlotsAndCannotBeRenewed() {
        DurableEngine engine = engine("leases");
        EngineLimits limits = engine.limits();
        Permit crashed = limits.tryAcquire("api", "lease-k", 2, Duration.ofMillis(200)).block(WAIT).orElseThrow();
        Permit renewed = limits.tryAcquire("api", "other", 1, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        assertThat(renewed.renew().block(WAIT)).isTrue();

        // The holder never renews nor releases: its slots come free when the lease ends.
        Optional<Permit> after = Eventually.until("the expired permit's slots free", WAIT,
                () -> limits.tryAcquire("api", "lease-k", 2).block(WAIT), Optional::isPresent);
        assertThat(crashed.renew().block(WAIT)).isFalse();
        after.orElseThrow().release().block(WAIT);
        assertThat(limiter().permitKeys("api", List.of("lease-k", "other"))).containsExactly("other");
    }

    @Test
    void anExpiredPermitStopsHoldingTheGatesJobsBackWithoutTheReconcile() {
        AtomicInteger ran = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("held-back", String.class, (String s) -> {
            ran.incrementAndGet();
            return Mono.just(s);
        }).queue("expiry");
        // The reconcile never runs here; the sweep ticks often.
        DurableEngine engine = engines.start(options("expiry").gate("api", 2)
                .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .bucketSweeper(Maintenance.TaskOptions.every(Duration.ofMillis(100)))
                .queue(queue("expiry")), job);
        EngineLimits limits = engine.limits();

        // A caller that crashed: its permit is never renewed nor released, and nothing else acquires.
        limits.tryAcquire("api", "crashed", 2, Duration.ofMillis(300)).block(WAIT).orElseThrow();
        long id = engine.insert(JobRequest.of("held-back", "x").gate("api", "crashed")).block(WAIT);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(ran.get()).isEqualTo(1);
        assertThat(limiter().permitKeys("api", List.of("crashed"))).isEmpty();
    }

    @Test
    void twoHundredWaitingAcquiresLeaveTheEnginesJobsRunningAndAllGetTheirTurn() {
        AtomicInteger runs = new AtomicInteger();
        // Each run outlives its lease (3 s): it only finishes when heartbeats still get connections.
        JobDefinition<String, String> slow = JobDefinition.of("slow", String.class, (String s) -> {
            runs.incrementAndGet();
            return Mono.delay(Duration.ofSeconds(4)).thenReturn(s);
        }).queue("crowd");
        DurableEngine engine = engines.start(options("crowd").gate("one", 1).queue(queue("crowd")), slow);
        EngineLimits limits = engine.limits();
        Permit held = limits.tryAcquire("one", "k", 1).block(WAIT).orElseThrow();

        Duration crowdWait = Duration.ofMinutes(5);
        AtomicInteger granted = new AtomicInteger();
        Mono<List<Boolean>> crowd = Flux.range(0, 200)
                .flatMap(i -> limits.acquire("one", "k", 1, crowdWait, Duration.ofSeconds(30))
                        .flatMap(permit -> {
                            granted.incrementAndGet();
                            return permit.release().thenReturn(true);
                        }), 200)
                .collectList()
                .cache();
        crowd.subscribe(null, error -> { });

        List<Long> ids = Flux.range(0, 8).concatMap(i -> engine.insert(JobRequest.of("slow", "job-" + i))).collectList()
                .block(WAIT);
        for (long id : ids) {
            assertThat(engines.awaitSettled(engine, id, Duration.ofMinutes(2)).status()).isEqualTo(InstanceStatus.DONE);
        }
        assertThat(runs.get()).isEqualTo(8); // no lease lost, no run repeated
        assertThat(granted.get()).isZero();

        held.release().block(WAIT);
        assertThat(crowd.block(crowdWait)).hasSize(200);
        assertThat(granted.get()).isEqualTo(200);
        assertThat(limiter().heldSlots("one", "k")).isZero();
    }

    @Test
    void rateLimitPermitsSpendTokensAndShardedGatesGrantTheirWholeCapacity() {
        DurableEngine engine = engine("tokens");
        EngineLimits limits = engine.limits();
        Permit two = limits.tryAcquire("quota", "tenant", 2).block(WAIT).orElseThrow();
        assertThat(two.holdsSlots()).isFalse();
        assertThat(limits.tryAcquire("quota", "tenant", 2).block(WAIT)).isEmpty();
        assertThat(limits.tryAcquire("quota", "tenant", 1).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("quota", "other-tenant", 3).block(WAIT)).isPresent();
        StepVerifier.create(limits.acquire("quota", "tenant", 1, Duration.ofMillis(300), Duration.ofSeconds(1)))
                .expectError(PermitTimeoutException.class).verify(WAIT);

        // Six slots on three shards of two: acquire tries the shards until all six are held.
        for (int i = 0; i < 6; i++) {
            assertThat(limits.acquire("wide", "k", 1).block(WAIT)).isNotNull();
        }
        assertThat(limiter().heldSlots("wide", "k")).isEqualTo(6);
        StepVerifier.create(limits.acquire("wide", "k", 1, Duration.ofMillis(300), Duration.ofSeconds(1)))
                .expectError(PermitTimeoutException.class).verify(WAIT);
    }

    @Test
    void badRequestsAreTypedErrors() {
        DurableEngine engine = engine("errors");
        EngineLimits limits = engine.limits();
        StepVerifier.create(limits.tryAcquire("nope", "k", 1)).expectError(UnknownLimitException.class).verify(WAIT);
        StepVerifier.create(limits.acquire("nope", "k", 1)).expectError(UnknownLimitException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("api", "k", 0)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("api", "k", 3)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("wide", "k", 3)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("quota", "k", 4)).expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(limits.tryAcquire("api", "k", 1, Duration.ZERO))
                .expectError(InvalidRequestException.class).verify(WAIT);
        StepVerifier.create(engines.build(options("unstarted").gate("api", 1)).limits().tryAcquire("api", "k", 1))
                .expectError(EngineClosedException.class).verify(WAIT);
    }

    @Test
    void windowPermitsAdmitAtMostTheLimitPerWindowEvenWhenAskedAtOnceAndSlide() {
        DurableEngine engine = engine("windows");
        EngineLimits limits = engine.limits();
        List<Optional<Permit>> answers = Flux.range(0, 20)
                .flatMap(i -> limits.tryAcquire("hourly", "tenant-a", 1), 20)
                .collectList().block(WAIT);
        assertThat(answers.stream().filter(Optional::isPresent).count()).isEqualTo(5);
        assertThat(limits.tryAcquire("hourly", "tenant-b", 5).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("hourly", "tenant-b", 1).block(WAIT)).isEmpty();
        StepVerifier.create(limits.tryAcquire("hourly", "tenant-c", 6)).expectError(InvalidRequestException.class)
                .verify(WAIT);

        // A short window on the limiter's clock: what it admitted slides out, so a wait ends with a
        // permit. That a full window refuses is shown by the hourly one above.
        assertThat(limits.tryAcquire("brief", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.acquire("brief", "p", 2, WAIT, Duration.ofSeconds(1)).block(WAIT).holdsSlots()).isFalse();
    }
}
