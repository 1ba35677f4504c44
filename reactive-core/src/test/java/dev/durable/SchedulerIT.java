package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.poke.PokeTransports;
import dev.durable.support.CountingConnectionFactory;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.time.Instant;
import java.util.function.Supplier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** The queue scheduler against the real database: demand, refill, polling, pokes, the pick. */
@ExtendWith(PostgresExtension.class)
class SchedulerIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    /** A job that runs until the test opens its gate, counting how many run at once. */
    static final class GatedJob {
        final Sinks.Empty<Void> gate = Sinks.empty();
        final AtomicInteger running = new AtomicInteger();
        final AtomicInteger maxRunning = new AtomicInteger();
        final AtomicInteger started = new AtomicInteger();

        JobDefinition<String, String> definition(String type, String queue) {
            return JobDefinition.of(type, String.class, (String args) -> Mono.defer(() -> {
                        started.incrementAndGet();
                        maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
                        return gate.asMono().thenReturn(args);
                    })
                    // Counted off as the handler answers, before its answer goes on: the engine may commit
                    // the outcome and start the next run before a doFinally here would run (on another
                    // thread, while this one still hands the answer on).
                    .doOnTerminate(running::decrementAndGet)
                    .doOnCancel(running::decrementAndGet))
                    .queue(queue);
        }

        void open() {
            gate.tryEmitEmpty();
        }
    }

    private static JobDefinition<String, String> noop(String queue) {
        return JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue(queue);
    }

    private static List<JobRequest> jobs(String type, int n) {
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            requests.add(JobRequest.of(type, "job-" + i));
        }
        return requests;
    }

    private static int held(DurableEngine engine) {
        QueueStats stats = engine.queueStats().get(0);
        return stats.running() + stats.committing() + stats.buffered();
    }

    private long executing(String queue) {
        return Sql.count(db, "status = 'executing' AND queue = '" + queue + "'");
    }

    @Test
    void claimsUpToConcurrencyPlusPrefetchAndRunsAtMostConcurrency() {
        GatedJob job = new GatedJob();
        DurableEngine engine = engines.start(engines.options("ceiling")
                        .queue(QueueOptions.builder("ceiling").concurrency(2).prefetch(3)
                                .pollInterval(Duration.ofMillis(100)).build()),
                job.definition("gated", "ceiling"));
        engine.insertAll(jobs("gated", 20)).block();

        Eventually.until("five rows claimed", WAIT, () -> executing("ceiling") == 5);
        Eventually.sleep(600); // several polls later, still no more than the ceiling
        assertThat(executing("ceiling")).isEqualTo(5);
        assertThat(held(engine)).isEqualTo(5);
        assertThat(job.maxRunning.get()).isEqualTo(2);

        job.open();
        Eventually.until("all done", WAIT, () -> Sql.count(db, "queue = 'ceiling' AND status = 'done'") == 20);
        assertThat(job.maxRunning.get()).isEqualTo(2);
    }

    @Test
    void aFinishedRunRefillsFromTheBufferWithoutAPick() {
        DurableEngine engine = engines.start(engines.options("refill")
                .queue(QueueOptions.builder("refill").concurrency(1).prefetch(9).minDemand(5)
                        .pollInterval(Duration.ofSeconds(30)).maxPollInterval(Duration.ofSeconds(30)).build()),
                noop("refill"));
        Supplier<QueueStats> scheduler = () -> engine.queueStats().get(0);
        Eventually.until("first pick done", WAIT, () -> scheduler.get().picks() >= 1 && (scheduler.get().running() + scheduler.get().committing() + scheduler.get().buffered()) == 0);
        Eventually.sleep(50);
        long picksBefore = scheduler.get().picks();

        engine.insertAll(jobs("noop", 10)).block();
        Eventually.until("all ten done", WAIT, () -> Sql.count(db, "queue = 'refill' AND status = 'done'") == 10);
        Eventually.sleep(100);

        // One pick (the poke) brought all ten; runs two to ten came from the buffer. A finished
        // run refills the buffer once five claims are free (min demand), buffer empty or not: two
        // more picks, which find nothing here. One round trip per row would be ten.
        assertThat(scheduler.get().picks() - picksBefore).isLessThanOrEqualTo(3);
        assertThat(scheduler.get().picked()).isEqualTo(10);
    }

    @Test
    void idlePollingBacksOffAndSnapsBackOnWork(TestDatabase database) {
        DurableEngine worker = engines.start(engines.options("poller")
                .queue(QueueOptions.builder("adaptive").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(400)).build()),
                noop("adaptive"));
        Supplier<QueueStats> scheduler = () -> worker.queueStats().get(0);
        Eventually.until("poll interval backs off to its ceiling", WAIT,
                () -> scheduler.get().pollInterval().equals(Duration.ofMillis(400)));

        // Another engine inserts: with the local transport no poke reaches the worker, the poll does.
        DurableEngine producer = engines.start(engines.options("producer"), noop("adaptive"));
        long id = producer.insert(JobRequest.of("noop", "x")).block();
        engines.awaitStatus(producer, id, InstanceStatus.DONE, WAIT);
        Eventually.until("poll interval snapped back", WAIT,
                () -> scheduler.get().pollInterval().compareTo(Duration.ofMillis(400)) < 0);
    }

    @Test
    void aPokeStartsIdleWorkAtOnceAndABurstCoalesces() {
        DurableEngine engine = engines.start(engines.options("poked")
                .queue(QueueOptions.builder("poked").pollInterval(Duration.ofSeconds(30))
                        .maxPollInterval(Duration.ofSeconds(30)).build()),
                noop("poked"));
        Supplier<QueueStats> scheduler = () -> engine.queueStats().get(0);
        Eventually.until("first pick done", WAIT, () -> scheduler.get().picks() >= 1);
        Eventually.sleep(50);

        // The poll is 30 s away: only the poke can start this job.
        long id = engine.insert(JobRequest.of("noop", "now")).block();
        engines.awaitStatus(engine, id, InstanceStatus.DONE, Duration.ofSeconds(10));

        long pokesBefore = scheduler.get().pokesHandled();
        for (int i = 0; i < 100; i++) {
            engine.insert(JobRequest.of("noop", "burst-" + i)).block();
        }
        Eventually.until("burst done", WAIT, () -> Sql.count(db, "queue = 'poked' AND status = 'done'") == 101);
        long handled = scheduler.get().pokesHandled() - pokesBefore;
        assertThat(handled).as("pokes handled after coalescing, of 100 sent").isLessThan(100);
    }

    @Test
    void anIdleQueueClaimsRowsAsTheyAreInsertedWithoutAPick() {
        DurableEngine engine = engines.start(engines.options("claimer")
                .queue(QueueOptions.builder("claimed").concurrency(2).prefetch(2).pollInterval(Duration.ofSeconds(30))
                        .maxPollInterval(Duration.ofSeconds(30)).build()),
                noop("claimed"));
        Supplier<QueueStats> scheduler = () -> engine.queueStats().get(0);
        Eventually.until("first pick found nothing", WAIT, () -> scheduler.get().picks() >= 1 && (scheduler.get().running() + scheduler.get().committing() + scheduler.get().buffered()) == 0);
        Eventually.sleep(50);
        long picksBefore = scheduler.get().picks();

        long id = engine.insert(JobRequest.of("noop", "now")).block();
        engines.awaitStatus(engine, id, InstanceStatus.DONE, Duration.ofSeconds(10));
        assertThat(scheduler.get().picks(PickTrigger.INSERT)).isEqualTo(1);
        // No pick brought it; the one pick since is the refill that found the queue empty after it.
        assertThat(scheduler.get().picks() - picksBefore).isLessThanOrEqualTo(1);
        // Six rows: the idle scheduler takes its ceiling (four) with the insert, picks the other two.
        List<Long> ids = engine.insertAll(jobs("noop", 6)).block();
        Eventually.until("all done", WAIT, () -> Sql.count(db, "queue = 'claimed' AND status = 'done'") == 7);
        assertThat(Sql.count(db, "queue = 'claimed' AND attempt = 1")).isEqualTo(7);
        assertThat(scheduler.get().picked()).isEqualTo(7);
        assertThat(ids).hasSize(6);
        // A row due later, or with a concurrency key, is never claimed at insert.
        long later = engine.insert(JobRequest.of("noop", "later").runIn(Duration.ofHours(1))).block();
        assertThat(engine.get(later).block().status()).isEqualTo(InstanceStatus.RUNNABLE);
    }

    @Test
    void aBusySchedulerDropsPokes() {
        GatedJob job = new GatedJob();
        DurableEngine engine = engines.start(engines.options("busy")
                .queue(QueueOptions.builder("busy").concurrency(1).pollInterval(Duration.ofSeconds(30))
                        .maxPollInterval(Duration.ofSeconds(30)).build()),
                job.definition("gated", "busy"));
        Supplier<QueueStats> scheduler = () -> engine.queueStats().get(0);
        engine.insert(JobRequest.of("gated", "first")).block();
        Eventually.until("first running", WAIT, () -> job.started.get() == 1);
        for (int i = 0; i < 5; i++) {
            engine.insert(JobRequest.of("gated", "more-" + i)).block();
            Eventually.sleep(30);
        }
        assertThat(scheduler.get().pokesDropped()).isPositive();
        job.open();
        Eventually.until("all done", WAIT, () -> Sql.count(db, "queue = 'busy' AND status = 'done'") == 6);
    }

    @Test
    void postgresNotifyPokesAnotherEngineAndTransactionalInsertsPokeOnCommit() {
        DurableEngine worker = engines.start(engines.options("listener")
                        .pokeTransport(PokeTransports.postgresNotify())
                        .queue(QueueOptions.builder("notify").pollInterval(Duration.ofSeconds(30))
                                .maxPollInterval(Duration.ofSeconds(30)).build()),
                noop("notify"));
        DurableEngine producer = engines.start(engines.options("sender")
                .pokeTransport(PokeTransports.postgresNotify()), noop("notify"));
        Eventually.until("worker idle", WAIT, () -> worker.queueStats().get(0).picks() >= 1);
        Eventually.sleep(100);

        long id = producer.insert(JobRequest.of("noop", "remote")).block();
        engines.awaitStatus(producer, id, InstanceStatus.DONE, Duration.ofSeconds(10));

        Long inTx = Flux.usingWhen(db.connectionFactory().create(),
                        (Connection c) -> Mono.from(c.beginTransaction())
                                .then(producer.insert(c, JobRequest.of("noop", "in-tx")))
                                .delayUntil(ignored -> Mono.delay(Duration.ofMillis(300)))
                                .flatMap(newId -> Mono.from(c.commitTransaction()).thenReturn(newId)),
                        Connection::close)
                .blockLast();
        engines.awaitStatus(producer, inTx, InstanceStatus.DONE, Duration.ofSeconds(10));
    }

    @Test
    void eachQueueRunsWithItsOwnKnobs() {
        GatedJob narrow = new GatedJob();
        GatedJob wide = new GatedJob();
        DurableEngine engine = engines.start(engines.options("queues")
                        .queue(QueueOptions.builder("narrow").concurrency(1).pollInterval(Duration.ofMillis(100)).build())
                        .queue(QueueOptions.builder("wide").concurrency(4).pollInterval(Duration.ofMillis(100)).build()),
                narrow.definition("narrow-job", "narrow"), wide.definition("wide-job", "wide"));
        engine.insertAll(jobs("narrow-job", 6)).block();
        engine.insertAll(jobs("wide-job", 6)).block();
        Eventually.until("both queues running", WAIT, () -> narrow.started.get() == 1 && wide.started.get() == 4);
        assertThat(engine.queueStats()).extracting(QueueStats::queue).containsExactlyInAnyOrder("narrow", "wide");
        narrow.open();
        wide.open();
        Eventually.until("all done", WAIT, () -> Sql.count(db, "status = 'done' AND queue IN ('narrow', 'wide')") == 12);
        assertThat(narrow.maxRunning.get()).isEqualTo(1);
        assertThat(wide.maxRunning.get()).isEqualTo(4);
    }

    @Test
    void aConcurrencyKeyRunsOneAtATimeAcrossEngines() {
        Map<String, AtomicInteger> active = new ConcurrentHashMap<>();
        AtomicInteger overlaps = new AtomicInteger();
        JobDefinition<String, String> keyed = JobDefinition.of("keyed", String.class, (String key) -> Mono.defer(() -> {
                    if (active.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet() > 1) {
                        overlaps.incrementAndGet();
                    }
                    // The handler's work ends before its result is emitted (and so before the commit that
                    // frees the key): a finally hook could run after the next holder started.
                    return Mono.delay(Duration.ofMillis(3)).map(tick -> {
                        active.get(key).decrementAndGet();
                        return key;
                    });
                }))
                .queue("keyed");
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            nodes.add(engines.start(engines.options("node" + n)
                    .queue(QueueOptions.builder("keyed").concurrency(6).prefetch(6)
                            .pollInterval(Duration.ofMillis(50)).build()), keyed));
        }
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 90; i++) {
            String key = "k" + (i % 3);
            requests.add(JobRequest.of("keyed", key).concurrencyKey(key));
        }
        nodes.get(0).insertAll(requests).block();
        Eventually.until("all keyed jobs done", Duration.ofSeconds(60),
                () -> Sql.count(db, "queue = 'keyed' AND status = 'done'") == 90);
        assertThat(overlaps.get()).isZero();
    }

    @Test
    void picksByPriorityThenEligibleTimeAndNeverEarly() {
        List<String> order = new CopyOnWriteArrayList<>();
        JobDefinition<String, String> record = JobDefinition.of("record", String.class,
                (String s) -> Mono.fromCallable(() -> {
                    order.add(s);
                    return s;
                })).queue("ordered");
        DurableEngine producer = engines.start(engines.options("orderer"), record);
        producer.insert(JobRequest.of("record", "p5").priority(5)).block();
        producer.insert(JobRequest.of("record", "p1-late").priority(1)).block();
        producer.insert(JobRequest.of("record", "p3").priority(3)).block();
        producer.insert(JobRequest.of("record", "p1-early").priority(1).runAt(Instant.parse("2020-01-01T00:00:00Z"))).block();
        long future = producer.insert(JobRequest.of("record", "future").priority(-10).runIn(Duration.ofHours(1))).block();

        engines.start(engines.options("runner")
                .queue(QueueOptions.builder("ordered").concurrency(1).pollInterval(Duration.ofMillis(50)).build()), record);
        Eventually.until("four ran", WAIT, () -> order.size() == 4);
        assertThat(order).containsExactly("p1-early", "p1-late", "p3", "p5");
        Eventually.sleep(300);
        assertThat(producer.get(future).block().status()).isEqualTo(InstanceStatus.RUNNABLE);
    }

    @Test
    void oneHeartbeatStatementPerTickRenewsEveryHeldRow() {
        CountingConnectionFactory counting = new CountingConnectionFactory(ConnectionFactories.get(db.url()));
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(counting).maxSize(6).build());
        try {
            GatedJob job = new GatedJob();
            DurableEngine engine = engines.start(engines.options("beating")
                            .connectionFactory(pool)
                            .queue(QueueOptions.builder("beat").concurrency(2).prefetch(3)
                                    .pollInterval(Duration.ofMillis(100)).build()),
                    job.definition("gated", "beat"));
            engine.insertAll(jobs("gated", 5)).block();
            Eventually.until("five held", WAIT, () -> executing("beat") == 5);
            Supplier<QueueStats> scheduler = () -> engine.queueStats().get(0);
            long ticksBefore = scheduler.get().heartbeats();
            long statementsBefore = counting.count(sql -> sql.contains("SET lease_expires_at"));

            Eventually.sleep(4000); // longer than the 3 s lease: only the heartbeat keeps the rows
            long ticks = scheduler.get().heartbeats() - ticksBefore;
            long statements = counting.count(sql -> sql.contains("SET lease_expires_at")) - statementsBefore;
            assertThat(ticks).isGreaterThanOrEqualTo(5);
            assertThat(statements).isEqualTo(ticks);
            assertThat(executing("beat")).isEqualTo(5);
            assertThat(Sql.count(db, "queue = 'beat' AND lease_expires_at > now() + interval '2 seconds'")).isEqualTo(5);
            assertThat(Sql.count(db, "queue = 'beat' AND attempt = 1")).isEqualTo(5);
            job.open();
            Eventually.until("all done", WAIT, () -> Sql.count(db, "queue = 'beat' AND status = 'done'") == 5);
        } finally {
            engines.afterEach(null);
            pool.disposeLater().block();
        }
    }

    @Test
    void outcomesAreGroupCommitted() {
        CountingConnectionFactory counting = new CountingConnectionFactory(ConnectionFactories.get(db.url()));
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(counting).maxSize(6).build());
        try {
            DurableEngine engine = engines.start(engines.options("grouped").connectionFactory(pool)
                            .queue(QueueOptions.builder("grouped").concurrency(50).prefetch(50)
                                    .pollInterval(Duration.ofMillis(100)).build()),
                    noop("grouped"));
            engine.insertAll(jobs("noop", 400)).block();
            Eventually.until("all done", WAIT, () -> Sql.count(db, "queue = 'grouped' AND status = 'done'") == 400);
            long commits = counting.count(sql -> sql.contains("AS o(id, worker"));
            assertThat(commits).as("commit statements for 400 outcomes").isLessThan(200);
        } finally {
            engines.afterEach(null);
            pool.disposeLater().block();
        }
    }
}
