package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.poke.PokeTransports;
import dev.durable.support.BlockingWatch;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Runs a workload with BlockHound watching every Reactor and Netty thread: any blocking call the
 * library makes there is recorded and fails the test. Runs in its own JVM (see the pom), since
 * BlockHound instruments the whole JVM.
 */
@ExtendWith(PostgresExtension.class)
class BlockHoundIT {

    private static final List<String> blockingCalls = BlockingWatch.blockingCalls();
    private static final List<Throwable> dropped = BlockingWatch.dropped();

    @RegisterExtension
    final Engines engines = new Engines();

    @BeforeAll
    static void install() {
        BlockingWatch.install();
    }

    @Test
    void nothingBlocksAReactiveThread(TestDatabase db) {
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

        AtomicInteger failures = new AtomicInteger();
        JobDefinition<String, String> work = JobDefinition.of("work", String.class, (String s) ->
                        s.startsWith("fail") && failures.incrementAndGet() % 2 == 1
                                ? Mono.error(new IllegalStateException("once"))
                                : Mono.delay(Duration.ofMillis(1)).thenReturn(s))
                .queue("hound").backoff(Backoff.fixed(Duration.ofMillis(20)));
        DurableEngine engine = engines.start(engines.options("hound")
                        .handlerScheduler(Schedulers.parallel())
                        .gate("hound-gate", 4, 2)
                        .pokeTransport(PokeTransports.postgresNotify())
                        .queue(QueueOptions.builder("hound").concurrency(8).prefetch(8).minDemand(4)
                                .pollInterval(Duration.ofMillis(50)).build()),
                work);
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            requests.add(JobRequest.of("work", (i % 10 == 0 ? "fail-" : "ok-") + i).concurrencyKey("k" + (i % 7)));
        }
        engine.insertAll(requests).block();
        long cancelled = engine.insert(JobRequest.of("work", "cancel-me").runIn(Duration.ofHours(1))).block();
        engine.cancel(cancelled).block();
        Eventually.until("all done", Duration.ofSeconds(60), () -> Sql.count(db, "queue = 'hound' AND status = 'done'") == 300);
        // Permits outside jobs (engine.limits()), asked from a parallel thread: ids, turns, shard tries.
        Long permits = Flux.range(0, 40)
                .flatMap(i -> engine.limits().acquire("hound-gate", "k", 1)
                        .flatMap(permit -> permit.renew().then(permit.release()).thenReturn(1L)), 20)
                .subscribeOn(Schedulers.parallel())
                .count().block(Duration.ofSeconds(60));
        assertThat(permits).isEqualTo(40L);
        engine.closeLater().block();

        assertThat(blockingCalls).isEmpty();
        assertThat(dropped).isEmpty();
    }
}
