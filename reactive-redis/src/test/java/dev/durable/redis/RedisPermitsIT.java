package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.InvalidRequestException;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.admin.GateUsage;
import dev.durable.admin.LimitUsage;
import dev.durable.limit.EngineLimits;
import dev.durable.limit.Permit;
import dev.durable.limit.PermitTimeoutException;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

/** engine.limits() on the Redis limiter: the same semantics as on PostgreSQL (issue 21). */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisPermitsIT {

    static final Duration WAIT = Duration.ofSeconds(60);
    private static final double TRICKLE = 0.001;

    @RegisterExtension
    final Engines engines = new Engines();

    private TestRedisServer redis;

    @BeforeEach
    void setUp(TestDatabase database, TestRedisServer server) {
        redis = server;
        engines.on(database);
    }

    /** The limiter under test; the RedisCluster* subclasses run these cases on a Redis Cluster. */
    dev.durable.limit.LimiterFactory limiter() {
        return RedisLimiters.redis(redis.uri());
    }

    private DurableEngine engine(String name, JobDefinition<?, ?>... jobs) {
        return engines.start(engines.options(name).limiter(limiter())
                .gate(name + "-api", 2).gate(name + "-wide", 6, 3).rateLimit(name + "-quota", TRICKLE, 3)
                .window(name + "-hourly", 5, Duration.ofHours(1)).window(name + "-brief", 2, Duration.ofMillis(400))
                .queue(QueueOptions.builder(name).pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(200)).build()), jobs);
    }

    @Test
    void gatePermitsAndJobsShareTheGate() {
        AtomicInteger ran = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("rshared", String.class, (String s) -> {
            ran.incrementAndGet();
            return Mono.just(s);
        }).queue("rp");
        DurableEngine engine = engine("rp", job);
        EngineLimits limits = engine.limits();

        Permit first = limits.tryAcquire("rp-api", "t1", 1).block(WAIT).orElseThrow();
        Permit second = limits.tryAcquire("rp-api", "t1", 1).block(WAIT).orElseThrow();
        assertThat(limits.tryAcquire("rp-api", "t1", 1).block(WAIT)).isEmpty();
        assertThat(limits.tryAcquire("rp-api", "t2", 2).block(WAIT)).isPresent();

        long id = engine.insert(JobRequest.of("rshared", "x").gate("rp-api", "t1")).block(WAIT);
        long picks = engine.queueStats("rp").orElseThrow().picks();
        Eventually.until("a few picks", WAIT, () -> engine.queueStats("rp").orElseThrow().picks() >= picks + 3);
        assertThat(ran.get()).isZero();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);

        first.release().block(WAIT);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // The job gave its slot back; the second permit still holds one of the two.
        Permit third = limits.tryAcquire("rp-api", "t1", 1).block(WAIT).orElseThrow();
        assertThat(limits.tryAcquire("rp-api", "t1", 1).block(WAIT)).isEmpty();
        second.release().then(third.release()).block(WAIT);
        assertThat(limits.tryAcquire("rp-api", "t1", 2).block(WAIT)).isPresent();
    }

    /** admin().limits() counts the permits Redis holds beside the executing rows the database shows. */
    @Test
    void adminLimitsShowThePermitSlotsRedisHolds() {
        Sinks.Empty<Void> release = Sinks.empty();
        AtomicInteger running = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("radmin", String.class, (String s) -> {
            running.incrementAndGet();
            return release.asMono().thenReturn(s);
        }).queue("radm");
        DurableEngine engine = engine("radm", job);
        EngineLimits limits = engine.limits();
        Permit pair = limits.tryAcquire("radm-api", "t1", 2).block(WAIT).orElseThrow();
        Permit shared = limits.tryAcquire("radm-api", "t2", 1).block(WAIT).orElseThrow();
        Permit wide = limits.tryAcquire("radm-wide", "k", 2).block(WAIT).orElseThrow();
        Permit wider = limits.tryAcquire("radm-wide", "k", 1).block(WAIT).orElseThrow();
        limits.tryAcquire("radm-api", "brief", 1, Duration.ofMillis(300)).block(WAIT).orElseThrow();
        long id = engine.insert(JobRequest.of("radmin", "x").gate("radm-api", "t2")).block(WAIT);
        Eventually.until("the job holding t2's other slot", WAIT, () -> running.get() == 1);

        // Over the wide gate's shards; the short lease gone once it ends; the job's row and t2's permit summed.
        LimitUsage usage = Eventually.until("the brief permit's lease over", WAIT,
                () -> engine.admin().limits().block(WAIT),
                seen -> seen.gates().stream().noneMatch(gate -> gate.key().equals("brief")));
        assertThat(usage.gates()).contains(new GateUsage("radm-api", "t1", 2, 2),
                new GateUsage("radm-api", "t2", 2, 2), new GateUsage("radm-wide", "k", 3, 6));

        pair.release().then(wide.release()).block(WAIT);
        release.tryEmitEmpty();
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(engine.admin().limits().block(WAIT).gates()).containsExactlyInAnyOrder(
                new GateUsage("radm-api", "t2", 1, 2), new GateUsage("radm-wide", "k", 1, 6));
        shared.release().then(wider.release()).block(WAIT);
        assertThat(engine.admin().limits().block(WAIT).gates()).isEmpty();
    }

    @Test
    void acquireWaitsLeasesEndAndTokensAreSpent() {
        DurableEngine engine = engine("rw");
        EngineLimits limits = engine.limits();
        Permit held = limits.tryAcquire("rw-api", "k", 2).block(WAIT).orElseThrow();
        StepVerifier.create(limits.acquire("rw-api", "k", 1, Duration.ofMillis(300), Duration.ofSeconds(30)))
                .expectError(PermitTimeoutException.class).verify(WAIT);
        Mono<Permit> waiting = limits.acquire("rw-api", "k", 1, WAIT, Duration.ofSeconds(30)).cache();
        waiting.subscribe(null, error -> { });
        held.release().delaySubscription(Duration.ofMillis(200)).block(WAIT);
        waiting.block(WAIT).release().block(WAIT);

        // A holder that never renews: its slots come free with its lease, and it cannot renew after.
        Permit crashed = limits.tryAcquire("rw-api", "lease", 2, Duration.ofMillis(300)).block(WAIT).orElseThrow();
        Permit renewing = limits.tryAcquire("rw-api", "lease2", 1, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        assertThat(renewing.renew().block(WAIT)).isTrue();
        Optional<Permit> after = Eventually.until("the expired permit's slots free", WAIT,
                () -> limits.tryAcquire("rw-api", "lease", 2).block(WAIT), Optional::isPresent);
        assertThat(crashed.renew().block(WAIT)).isFalse();
        after.orElseThrow().release().block(WAIT);

        Permit two = limits.tryAcquire("rw-quota", "tenant", 2).block(WAIT).orElseThrow();
        assertThat(two.holdsSlots()).isFalse();
        assertThat(limits.tryAcquire("rw-quota", "tenant", 2).block(WAIT)).isEmpty();
        assertThat(limits.tryAcquire("rw-quota", "tenant", 1).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("rw-quota", "other", 3).block(WAIT)).isPresent();

        for (int i = 0; i < 6; i++) {
            assertThat(limits.acquire("rw-wide", "k", 1).block(WAIT)).isNotNull();
        }
        StepVerifier.create(limits.acquire("rw-wide", "k", 1, Duration.ofMillis(300), Duration.ofSeconds(1)))
                .expectError(PermitTimeoutException.class).verify(WAIT);
    }

    @Test
    void windowPermitsAdmitAtMostTheLimitPerWindowEvenWhenAskedAtOnceAndSlide() {
        DurableEngine engine = engine("rwin");
        EngineLimits limits = engine.limits();
        List<Optional<Permit>> answers = Flux.range(0, 20)
                .flatMap(i -> limits.tryAcquire("rwin-hourly", "tenant-a", 1), 20)
                .collectList().block(WAIT);
        assertThat(answers.stream().filter(Optional::isPresent).count()).isEqualTo(5);
        assertThat(limits.tryAcquire("rwin-hourly", "tenant-b", 5).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("rwin-hourly", "tenant-b", 1).block(WAIT)).isEmpty();
        StepVerifier.create(limits.tryAcquire("rwin-hourly", "tenant-c", 6)).expectError(InvalidRequestException.class)
                .verify(WAIT);

        // A short window (Redis's clock, no test clock there): what it admitted slides out, so a wait
        // ends with a permit. That a full window refuses is shown by the hourly one above.
        assertThat(limits.tryAcquire("rwin-brief", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.acquire("rwin-brief", "p", 2, WAIT, Duration.ofSeconds(1)).block(WAIT).holdsSlots()).isFalse();
    }
}
