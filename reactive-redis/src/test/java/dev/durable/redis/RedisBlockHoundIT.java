package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.support.BlockingWatch;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.redis.testing.RedisClusterExtension;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisCluster;
import dev.durable.limit.Permit;
import io.lettuce.core.cluster.RedisClusterClient;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * Pokes between engines, a Redis restart and a membership's whole life with BlockHound watching
 * every Reactor and Netty thread (Lettuce's event loops included): any blocking call is recorded
 * and fails the test. Runs in its own JVM (see the pom).
 */
@ExtendWith({PostgresExtension.class, RedisExtension.class, RedisClusterExtension.class})
class RedisBlockHoundIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final List<String> blockingCalls = BlockingWatch.blockingCalls();
    private static final List<Throwable> dropped = BlockingWatch.dropped();

    @RegisterExtension
    final Engines engines = new Engines();

    @BeforeAll
    static void install() {
        BlockingWatch.install();
    }

    @Test
    void nothingBlocksAReactiveThread(TestDatabase db, TestRedisServer redis) {
        engines.on(db);
        Mono.delay(Duration.ofMillis(1)).doOnNext(tick -> {
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }).block();
        assertThat(blockingCalls).as("BlockHound sees a sleep on a parallel thread").hasSize(1);
        blockingCalls.clear();

        JobDefinition<String, String> work = JobDefinition.of("work", String.class,
                (String s) -> Mono.delay(Duration.ofMillis(1)).thenReturn(s)).queue("hound");
        DurableEngine worker = engines.start(engines.options("worker")
                .pokeTransport(RedisPokeTransports.redis(redis.uri()))
                .queue(QueueOptions.builder("hound").pollInterval(Duration.ofSeconds(30))
                        .maxPollInterval(Duration.ofSeconds(30)).build()), work);
        DurableEngine producer = engines.start(engines.options("producer")
                .pokeTransport(RedisPokeTransports.redis(redis.uri())), work);

        RedisMembershipOptions options = RedisMembershipOptions.builder("hound", "a").ttl(Duration.ofSeconds(2))
                .heartbeatInterval(Duration.ofMillis(200)).pollInterval(Duration.ofMillis(50)).build();
        RedisMembership a = RedisMemberships.join(redis.redisUri(), options).block(WAIT);
        RedisMembership b = RedisMemberships.join(redis.redisUri(), options.mutate().nodeId("b").build()).block(WAIT);
        AtomicReference<Set<String>> seen = new AtomicReference<>(Set.of());
        Disposable watching = a.members().subscribe(seen::set, dropped::add);
        Eventually.until("both members", WAIT, () -> seen.get().equals(Set.of("a", "b")));

        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            ids.add(producer.insert(JobRequest.of("work", "job-" + i)).block(WAIT));
        }
        if (redis.isEmbedded()) {
            redis.stop();
            for (int i = 10; i < 20; i++) {
                ids.add(producer.insert(JobRequest.of("work", "job-" + i)).block(WAIT));
            }
            Eventually.sleep(500);
            redis.start();
        }
        for (long id : ids) {
            engines.awaitStatus(producer, id, InstanceStatus.DONE, WAIT);
        }
        b.close().block(WAIT);
        Eventually.until("b gone", WAIT, () -> seen.get().equals(Set.of("a")));
        watching.dispose();
        a.close().block(WAIT);
        worker.closeLater().block(WAIT);
        producer.closeLater().block(WAIT);

        assertThat(blockingCalls).as("blocking calls on reactive threads").isEmpty();
        assertThat(dropped).as("errors dropped").isEmpty();
    }

    /**
     * The Redis limiter on a cluster (connecting through a fresh client, whose slots it loads first),
     * a fair queue with a per-key cap admitted by it, permits, and admin's SCAN of the permits.
     */
    @Test
    void theClusterLimiterBlocksNoReactiveThread(TestDatabase db, TestRedisCluster cluster) {
        engines.on(db);
        blockingCalls.clear();
        RedisClusterClient client = cluster.client();
        try {
            JobDefinition<String, String> work = JobDefinition.of("capped", String.class,
                    (String s) -> Mono.delay(Duration.ofMillis(1)).thenReturn(s)).queue("hound-fair");
            DurableEngine engine = engines.start(engines.options("hound-cluster")
                    .limiter(RedisLimiters.redisCluster(client, RedisLimiterOptions.defaults())).gate("hound-api", 2)
                    .queue(QueueOptions.builder("hound-fair").pollInterval(Duration.ofMillis(50))
                            .fairness(dev.durable.Fairness.builder().maxExecutingPerKey(1).build()).build()), work);
            Permit permit = engine.limits().tryAcquire("hound-api", "k", 1).block(WAIT).orElseThrow();
            List<Long> ids = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                String key = "t" + (i % 2);
                ids.add(engine.insert(JobRequest.of("capped", key).fairnessKey(key)).block(WAIT));
            }
            for (long id : ids) {
                engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
            }
            assertThat(engine.admin().limits().block(WAIT).gates()).extracting(gate -> gate.held()).contains(1L);
            permit.release().block(WAIT);
            engine.closeLater().block(WAIT);
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(5));
        }
        assertThat(blockingCalls).as("blocking calls on reactive threads").isEmpty();
        assertThat(dropped).as("errors dropped").isEmpty();
    }
}
