package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.ConnectionGauge;
import dev.durable.support.CountingConnectionFactory;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * awaitSettled against the real database: every waiter of an engine shares one read a tick on one
 * connection, transitions made here answer at once, a timeout carries the last snapshot.
 */
@ExtendWith(PostgresExtension.class)
class SettleWaitIT {

    private static final Duration WAIT = Duration.ofMinutes(2);
    /** The settle-waiters' shared read, told apart from every other statement. */
    private static final Predicate<String> WATCH = sql -> sql.contains("AS w(wid, seen)");

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private static JobDefinition<String, String> noop(String queue) {
        return JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue(queue);
    }

    private static List<JobRequest> jobs(int n) {
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            requests.add(JobRequest.of("noop", "job-" + i));
        }
        return requests;
    }

    @Test
    void aThousandWaitersOnInstancesSettledElsewhereShareOneConnectionAndOneReadATick() throws Exception {
        CountingConnectionFactory counting = new CountingConnectionFactory(ConnectionFactories.get(db.url()));
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(counting).maxSize(10).build());
        ConnectionGauge gauge = new ConnectionGauge(pool);
        try {
            // The waiting engine runs no queue and is never started: every connection it takes is the waiters'.
            DurableEngine waiting = engines.build(engines.options("waiting").connectionFactory(gauge)
                    .settlePollInterval(Duration.ofMillis(500)), noop("settle"));
            waiting.migrate().block(WAIT);
            List<Long> ids = waiting.insertAll(jobs(1000)).block(WAIT);
            counting.reset();
            gauge.resetPeak();

            CompletableFuture<List<Instance>> settled = Flux.fromIterable(ids)
                    .flatMap(id -> waiting.awaitSettled(id, WAIT), ids.size())
                    .collectList()
                    .toFuture();
            // Every waiter has had its first read (all runnable) before the other engine starts to settle them.
            Eventually.until("first reads", WAIT, () -> counting.count(WATCH) >= 2 && !settled.isDone());
            engines.start(engines.options("settling").queue(QueueOptions.builder("settle").concurrency(50)
                    .prefetch(50).pollInterval(Duration.ofMillis(100)).build()), noop("settle"));

            List<Instance> instances = settled.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertThat(instances).hasSize(1000).allMatch(instance -> instance.status() == InstanceStatus.DONE);
            assertThat(instances).extracting(Instance::id).containsExactlyInAnyOrderElementsOf(ids);
            // One connection for a thousand waiters, and far fewer reads than waiters (a poller each
            // would have read each instance at least once): only the shared read ran.
            assertThat(gauge.peak()).isEqualTo(1);
            long reads = counting.count(WATCH);
            assertThat(reads).isLessThan(200);
            assertThat(counting.count(sql -> true)).isEqualTo(reads);
        } finally {
            pool.disposeLater().block(WAIT);
        }
    }

    @Test
    void aTransitionMadeHereAnswersAtOnceWithoutATick() {
        Sinks.Empty<Void> gate = Sinks.empty();
        DurableEngine engine = engines.start(engines.options("local")
                        .settlePollInterval(Duration.ofHours(1))
                        .queue(QueueOptions.builder("local").pollInterval(Duration.ofMillis(100)).build()),
                JobDefinition.of("gated", String.class, (String s) -> gate.asMono().thenReturn(s)).queue("local"));
        long id = engine.insert(JobRequest.of("gated", "x")).block(WAIT);
        engines.awaitStatus(engine, id, InstanceStatus.EXECUTING, WAIT);

        CompletableFuture<Instance> settled = engine.awaitSettled(id, WAIT).toFuture();
        // A second waiter on the same instance times out with the snapshot the shared entry read:
        // so the first read is done, and with a tick of an hour only this engine's commit can wake the first.
        Instance seen = Eventually.until("the first read", WAIT, () -> {
            try {
                engine.awaitSettled(id, Duration.ofMillis(200)).block(WAIT);
                return null;
            } catch (DurableTimeoutException timeout) {
                return timeout.lastSeen().orElse(null);
            }
        }, snapshot -> snapshot != null);
        assertThat(seen.status()).isEqualTo(InstanceStatus.EXECUTING);
        assertThat(settled).isNotDone();

        gate.tryEmitEmpty();
        assertThat(settled.join().status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void aTimeoutCarriesTheInstanceAsLastSeenAndAnUnknownIdIsNoTarget() {
        DurableEngine engine = engines.build(engines.options("client"), noop("nobody-runs-this"));
        engine.migrate().block(WAIT);
        long id = engine.insert(JobRequest.of("noop", "waits").queue("nobody-runs-this")).block(WAIT);

        assertThatThrownBy(() -> engine.awaitSettled(id, Duration.ofSeconds(5)).block(WAIT))
                .isInstanceOfSatisfying(DurableTimeoutException.class, timeout -> {
                    assertThat(timeout.lastSeen()).get().satisfies(instance -> {
                        assertThat(instance.id()).isEqualTo(id);
                        assertThat(instance.status()).isEqualTo(InstanceStatus.RUNNABLE);
                    });
                    assertThat(timeout).hasMessageContaining("instance " + id).hasMessageContaining("runnable");
                });
        Instance current = engine.awaitSettledOrCurrent(id, Duration.ofMillis(300)).block(WAIT);
        assertThat(current.id()).isEqualTo(id);
        assertThat(current.status()).isEqualTo(InstanceStatus.RUNNABLE);

        assertThatThrownBy(() -> engine.awaitSettled(Long.MAX_VALUE, WAIT).block(WAIT))
                .isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> engine.awaitSettledOrCurrent(Long.MAX_VALUE, WAIT).block(WAIT))
                .isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> engine.awaitSettled(id, Duration.ZERO).block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
    }

    @Test
    void waitersThatTimedOutOrWereCancelledLeaveNoReadBehind() {
        CountingConnectionFactory counting = new CountingConnectionFactory(db.connectionFactory());
        DurableEngine engine = engines.build(engines.options("leaving").connectionFactory(counting)
                .settlePollInterval(Duration.ofMillis(50)), noop("nobody-runs-this"));
        engine.migrate().block(WAIT);
        List<Long> ids = engine.insertAll(jobs(50).stream().map(r -> r.queue("nobody-runs-this")).toList())
                .block(WAIT);

        List<Disposable> cancelled = new ArrayList<>();
        for (long id : ids.subList(0, 25)) {
            cancelled.add(engine.awaitSettled(id, WAIT).subscribe(null, error -> { }));
        }
        Flux.fromIterable(ids.subList(25, 50))
                .flatMap(id -> engine.awaitSettled(id, Duration.ofSeconds(1))
                        .onErrorResume(DurableTimeoutException.class, timeout -> Mono.empty()))
                .blockLast(WAIT);
        cancelled.forEach(Disposable::dispose);

        // A round that began as the last waiters left may still be on its way to the database.
        Eventually.sleep(500);
        long reads = counting.count(WATCH);
        assertThat(reads).isPositive();
        Eventually.sleep(1000);
        assertThat(counting.count(WATCH)).as("reads after every waiter left").isEqualTo(reads);
    }
}
