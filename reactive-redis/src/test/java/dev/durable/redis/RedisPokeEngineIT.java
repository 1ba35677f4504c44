package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.durable.QueueStats;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.function.Supplier;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Two engines on one database poking each other through Redis: the worker polls every 30 s, so
 * anything that finishes in seconds was poked. Redis going away and coming back loses and doubles
 * nothing.
 */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisPokeEngineIT {

    private static final Duration SLOW_POLL = Duration.ofSeconds(30);
    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestRedisServer redis;

    @BeforeEach
    void setUp(TestDatabase database, TestRedisServer server) {
        engines.on(database);
        redis = server;
    }

    /** Counts runs per job argument, so a doubled run shows. */
    private static final class Counting {
        final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();

        JobDefinition<String, String> definition(String queue) {
            return JobDefinition.of("count", String.class, (String args) -> Mono.fromSupplier(() -> {
                runs.computeIfAbsent(args, key -> new AtomicInteger()).incrementAndGet();
                return args;
            }).delayElement(Duration.ofMillis(10))).queue(queue);
        }
    }

    /** The engine's transport, caught as the engine makes it so the test can read its counters. */
    private static PokeTransportFactory capturing(PokeTransportFactory factory, AtomicReference<RedisPokeTransport> into) {
        return context -> factory.create(context).doOnNext(transport -> into.set((RedisPokeTransport) transport));
    }

    private EngineOptions.Builder slowWorker(String name, String queue, PokeTransportFactory transport) {
        return engines.options(name).pokeTransport(transport)
                .queue(QueueOptions.builder(queue).concurrency(4).pollInterval(SLOW_POLL).maxPollInterval(SLOW_POLL).build());
    }

    private static void awaitIdle(DurableEngine worker) {
        Supplier<QueueStats> scheduler = () -> worker.queueStats().get(0);
        Eventually.until("the worker's first (empty) pick", WAIT, () -> scheduler.get().picks() >= 1);
        Eventually.sleep(100);
    }

    @Test
    void aJobInsertedOnOneEngineRunsOnTheOtherAtOnceAndEchoesAreIgnored() {
        Counting job = new Counting();
        AtomicReference<RedisPokeTransport> workerTransport = new AtomicReference<>();
        AtomicReference<RedisPokeTransport> producerTransport = new AtomicReference<>();
        DurableEngine worker = engines.start(slowWorker("worker", "fast",
                capturing(RedisPokeTransports.redis(redis.uri()), workerTransport)), job.definition("fast"));
        // The producer runs no queue: only a poke through Redis can get its job picked before the poll.
        DurableEngine producer = engines.start(engines.options("producer")
                .pokeTransport(capturing(RedisPokeTransports.redis(redis.uri()), producerTransport)), job.definition("fast"));
        awaitIdle(worker);

        for (int i = 0; i < 3; i++) {
            long started = System.nanoTime();
            long id = producer.insert(JobRequest.of("count", "job-" + i)).block(WAIT);
            engines.awaitStatus(producer, id, InstanceStatus.DONE, Duration.ofSeconds(20));
            Duration latency = Duration.ofNanos(System.nanoTime() - started);
            assertThat(latency).as("insert to done, with a 30 s poll").isLessThan(Duration.ofSeconds(5));
        }

        assertThat(worker.queueStats().get(0).pokesHandled()).isGreaterThanOrEqualTo(3);
        RedisPokeTransport sent = producerTransport.get();
        RedisPokeTransport heard = workerTransport.get();
        // Redis may deliver a message before the publisher has its reply: wait until all settle.
        Eventually.until("every message published, echoed and received", WAIT,
                () -> sent.stats().published() >= 3 && sent.stats().echoesIgnored() == sent.stats().published()
                        && heard.stats().received() == sent.stats().published());
        assertThat(sent.stats().received()).as("the worker sent nothing").isZero();
        assertThat(heard.stats().echoesIgnored()).isZero();
        assertThat(job.runs).hasSize(3).allSatisfy((args, runs) -> assertThat(runs.get()).isEqualTo(1));
    }

    @Test
    void redisStoppedAndRestartedMidRunLosesNothingAndDoublesNothing() {
        assumeTrue(redis.isEmbedded(), "needs the embedded Redis to stop and start it");
        Counting job = new Counting();
        AtomicReference<RedisPokeTransport> workerTransport = new AtomicReference<>();
        DurableEngine worker = engines.start(slowWorker("worker", "outage",
                capturing(RedisPokeTransports.redis(redis.uri()), workerTransport)), job.definition("outage"));
        DurableEngine producer = engines.start(engines.options("producer")
                .pokeTransport(RedisPokeTransports.redis(redis.uri())), job.definition("outage"));
        awaitIdle(worker);

        int total = 0;
        total += insert(producer, "before", 20);
        redis.stop();
        total += insert(producer, "during", 20);
        Eventually.sleep(500); // both engines notice the outage and Lettuce tries to reconnect meanwhile
        total += insert(producer, "during-later", 20);
        redis.start();
        total += insert(producer, "after", 20);

        int expected = total;
        Eventually.until("every job ran", WAIT, () -> job.runs.size() == expected
                && worker.list("outage", InstanceStatus.DONE, 0, 1000).count().block(WAIT) == expected);
        assertThat(job.runs.values()).as("runs per job").allSatisfy(runs -> assertThat(runs.get()).isEqualTo(1));

        // Pokes flow again: a new job is picked on a poke, not on the 30 s poll.
        long pokesBefore = worker.queueStats().get(0).pokesHandled();
        long receivedBefore = workerTransport.get().stats().received();
        long started = System.nanoTime();
        long id = producer.insert(JobRequest.of("count", "after-restart")).block(WAIT);
        engines.awaitStatus(producer, id, InstanceStatus.DONE, Duration.ofSeconds(20));
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(10));
        assertThat(workerTransport.get().stats().received()).isGreaterThan(receivedBefore);
        assertThat(worker.queueStats().get(0).pokesHandled()).isGreaterThan(pokesBefore);
        assertThat(job.runs.get("after-restart").get()).isEqualTo(1);
    }

    private static int insert(DurableEngine producer, String label, int n) {
        for (int i = 0; i < n; i++) {
            producer.insert(JobRequest.of("count", label + "-" + i)).block(WAIT);
        }
        return n;
    }
}
