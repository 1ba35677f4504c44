package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.support.TcpProxy;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/**
 * What production does to the runtime (issue 15), on the real database: stalled connections and
 * statements, a partitioned database at close, cancels that must stop work, rows lost under a
 * worker, hot concurrency keys, work no engine can run, and where user code and JSON run.
 */
@ExtendWith(PostgresExtension.class)
class RuntimeIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private static JobDefinition<String, String> quick(String queue) {
        return JobDefinition.of("quick", String.class, (String s) -> Mono.just(s)).queue(queue);
    }

    @Test
    void aStatementStalledOnAFrozenConnectionCostsATimeoutNotTheQueueAndItsRowIsRecovered() {
        // The commit of the first 'fragile' outcome stalls in the server (a trigger sleeps, then
        // refuses it); the test freezes that connection at the proxy while it waits, as a half-open
        // TCP connection would be. The engine must cut the call at its bound, discard the
        // connection, keep the queue running on others, and recover the row through its lease.
        db.execute("CREATE SCHEMA IF NOT EXISTS \"" + db.schema() + "\"");
        try (TcpProxy proxy = TcpProxy.forUrl(db.url())) {
            JobDefinition<String, String> fragile = JobDefinition.of("fragile", String.class,
                    (String s) -> Mono.just("saved " + s)).queue("stalls");
            DurableEngine engine = engines.start(db.engineOptions().url(proxy.proxiedUrl(db.url())).name("stalls")
                    .leaseTtl(Duration.ofSeconds(6)).heartbeatInterval(Duration.ofMillis(500))
                    .reaperInterval(Duration.ofMillis(500)).callTimeout(Duration.ofSeconds(2))
                    .queue(QueueOptions.builder("stalls").concurrency(4).pollInterval(Duration.ofMillis(100)).build()),
                    fragile, quick("stalls"));
            // A done outcome moves its row to the history: the first attempt's move stalls, then fails.
            db.execute("CREATE FUNCTION \"" + db.schema() + "\".stall_once() RETURNS trigger LANGUAGE plpgsql AS $$"
                    + " BEGIN IF NEW.type = 'fragile' AND NEW.status = 'done' AND NEW.attempt = 1 THEN"
                    + " PERFORM pg_sleep(5); RAISE EXCEPTION 'commit refused after a stall'; END IF; RETURN NEW; END $$");
            db.execute("CREATE TRIGGER stall_once BEFORE INSERT ON \"" + db.schema() + "\".durable_history"
                    + " FOR EACH ROW EXECUTE FUNCTION \"" + db.schema() + "\".stall_once()");

            long id = engine.insert(JobRequest.of("fragile", "order-7")).block();
            Integer port = Eventually.until("the fragile commit stalls in the server", WAIT,
                    () -> Sql.query(db, "SELECT client_port FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
                            + " AND query LIKE 'WITH moved AS%'", row -> row.get(0, Integer.class)),
                    ports -> !ports.isEmpty()).get(0);
            TcpProxy.Link frozen = proxy.linkByUpstreamPort(port).orElseThrow();
            proxy.freeze(frozen);

            // The queue keeps running meanwhile, on the pool's other connections.
            List<Long> others = engine.insertAll(List.of(JobRequest.of("quick", "a"), JobRequest.of("quick", "b"),
                    JobRequest.of("quick", "c"))).block();
            for (long other : others) {
                engines.awaitStatus(engine, other, InstanceStatus.DONE, WAIT);
            }
            // The row's outcome never committed: its lease lapses and it runs again.
            Instance recovered = engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
            assertThat(recovered.attempt()).isEqualTo(2);
            assertThat(recovered.resultJson()).isEqualTo("\"saved order-7\"");
            // The stalled call was cut at its bound and its connection discarded, not pooled again:
            // once the link thaws, the engine's side is found closed (a pooled one would stay open).
            proxy.thaw(frozen);
            Eventually.until("the frozen connection discarded", WAIT, () -> !frozen.isOpen());
        }
    }

    @Test
    void closeEndsWithinItsBoundsWhenTheDatabaseIsUnreachable() {
        try (TcpProxy proxy = TcpProxy.forUrl(db.url())) {
            Sinks.Empty<Void> gate = Sinks.empty();
            AtomicInteger started = new AtomicInteger();
            JobDefinition<String, String> held = JobDefinition.of("held", String.class, (String s) -> {
                started.incrementAndGet();
                return gate.asMono().thenReturn(s);
            }).queue("cut");
            DurableEngine engine = engines.build(db.engineOptions().url(proxy.proxiedUrl(db.url())).name("cut")
                    .leaseTtl(Duration.ofSeconds(6)).heartbeatInterval(Duration.ofMillis(500))
                    .callTimeout(Duration.ofSeconds(2))
                    .queue(QueueOptions.builder("cut").concurrency(1).prefetch(2).drainTimeout(Duration.ofSeconds(1))
                            .pollInterval(Duration.ofMillis(100)).build()), held);
            engine.start().block(WAIT);
            engine.insertAll(List.of(JobRequest.of("held", "1"), JobRequest.of("held", "2"))).block();
            Eventually.until("one running, one buffered", WAIT, () -> started.get() == 1
                    && engine.queueStats().get(0).buffered() == 1);

            proxy.partition(); // every connection, old and new, goes silent
            long before = System.nanoTime();
            engine.closeLater().block(WAIT); // without bounds this would wait for the database for ever
            Duration took = Duration.ofNanos(System.nanoTime() - before);
            System.out.println("CLOSE_UNDER_PARTITION took=" + took.toMillis() + "ms");
            proxy.heal();
            gate.tryEmitEmpty();
        }
    }

    @Test
    void aCancelStopsARunningHandlerWhichCanSeeItAndEndsTheInstanceCancelled() {
        AtomicBoolean emailSent = new AtomicBoolean();
        AtomicBoolean blockingSawCancel = new AtomicBoolean();
        CopyOnWriteArrayList<String> started = new CopyOnWriteArrayList<>();
        JobDefinition<String, String> email = JobDefinition.of("email", String.class,
                (String to) -> Mono.fromRunnable(() -> started.add(to))
                        .then(Mono.delay(Duration.ofSeconds(30)))
                        .doOnNext(tick -> emailSent.set(true))
                        .thenReturn("sent to " + to)).queue("mail");
        JobDefinition<String, String> report = JobDefinition.of("report", String.class, (String s, JobContext ctx) ->
                Mono.fromCallable(() -> {
                    started.add(s);
                    // Blocking work that checks between pieces whether it should stop. Disposing the
                    // handler interrupts its thread, so a sleep may end early too.
                    try {
                        for (int piece = 0; piece < 600 && !ctx.cancellation().isRequested(); piece++) {
                            Thread.sleep(50);
                        }
                    } catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                    }
                    blockingSawCancel.set(ctx.cancellation().isRequested());
                    return "partial";
                }).subscribeOn(Schedulers.boundedElastic())).queue("mail");
        DurableEngine engine = engines.start(engines.options("canceller")
                .queue(QueueOptions.builder("mail").concurrency(2).pollInterval(Duration.ofMillis(100)).build()),
                email, report);
        long mail = engine.insert(JobRequest.of("email", "ada@example.com")).block();
        long blocking = engine.insert(JobRequest.of("report", "q3")).block();
        Eventually.until("both running", WAIT, () -> started.size() == 2);

        assertThat(engine.cancel(mail).block()).isEqualTo(CancelResult.REQUESTED);
        assertThat(engine.cancel(blocking).block()).isEqualTo(CancelResult.REQUESTED);
        // Within a heartbeat or two (500 ms), not at the end of the 30 s handler.
        assertThat(engine.awaitSettled(mail, Duration.ofSeconds(20)).block().status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(engine.awaitSettled(blocking, Duration.ofSeconds(20)).block().status())
                .isEqualTo(InstanceStatus.CANCELLED);
        Eventually.until("the blocking handler saw the cancel", WAIT, blockingSawCancel::get);
        assertThat(emailSent).isFalse();
        assertThat(engine.queueStats().get(0).runsCancelled()).isEqualTo(2);
    }

    @Test
    void aBufferedRowThatWasCancelledOrLostIsNeverStarted() {
        Sinks.Empty<Void> gate = Sinks.empty();
        Set<String> started = ConcurrentHashMap.newKeySet();
        JobDefinition<String, String> work = JobDefinition.of("work", String.class, (String s) -> {
            started.add(s);
            return s.equals("first") ? gate.asMono().thenReturn(s) : Mono.just(s);
        }).queue("buffered");
        DurableEngine engine = engines.start(engines.options("bufferer")
                .queue(QueueOptions.builder("buffered").concurrency(1).prefetch(3).pollInterval(Duration.ofMillis(100))
                        .build()), work);
        long first = engine.insert(JobRequest.of("work", "first")).block();
        Eventually.until("first running", WAIT, () -> started.contains("first"));
        List<Long> waiting = engine.insertAll(List.of(JobRequest.of("work", "cancelled"), JobRequest.of("work", "lost"),
                JobRequest.of("work", "kept"))).block();
        Eventually.until("three buffered", WAIT, () -> engine.queueStats().get(0).buffered() == 3);

        assertThat(engine.cancel(waiting.get(0)).block()).isEqualTo(CancelResult.REQUESTED);
        // Another node took this one over (as after an expired lease and a new claim).
        Sql.update(db, "UPDATE {schema}.durable_instances SET claimed_by = 'another-node' WHERE id = $1", waiting.get(1));
        Eventually.until("the heartbeat dropped both from the buffer", WAIT,
                () -> engine.queueStats().get(0).buffered() == 1);
        engines.awaitStatus(engine, waiting.get(0), InstanceStatus.CANCELLED, WAIT);

        gate.tryEmitEmpty();
        engines.awaitStatus(engine, first, InstanceStatus.DONE, WAIT);
        engines.awaitStatus(engine, waiting.get(2), InstanceStatus.DONE, WAIT);
        assertThat(started).containsExactlyInAnyOrder("first", "kept");
        assertThat(engine.get(waiting.get(1)).block().claimedBy()).isEqualTo("another-node");
        assertThat(engine.queueStats().get(0).leasesLost()).isEqualTo(1);
    }

    /**
     * A worker back from a pause longer than its lease (a stopped JVM, a long GC) finds its lease
     * run out before the reaper came: its heartbeat must not revive it, since a lease-native limiter
     * already gave the row's gate slot away. The run is stopped as lost, and the reaper's recovery
     * runs the row again.
     */
    @Test
    void aLeaseThatRanOutIsNeverRenewedEvenBeforeTheReaperComes() {
        Sinks.Empty<Void> hold = Sinks.empty();
        AtomicInteger runs = new AtomicInteger();
        JobDefinition<String, String> work = JobDefinition.of("paused", String.class, (String s) ->
                runs.incrementAndGet() == 1 ? hold.asMono().thenReturn(s) : Mono.just(s)).queue("paused");
        DurableEngine engine = engines.start(engines.options("pauser")
                .reaperInterval(Duration.ofHours(1))
                .queue(QueueOptions.builder("paused").pollInterval(Duration.ofMillis(100)).build()), work);
        long id = engine.insert(JobRequest.of("paused", "p")).block();
        Eventually.until("running", WAIT, () -> runs.get() == 1);
        // The lease ran out while the worker was away, and no reaper has come since.
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() - interval '1 second'"
                + " WHERE id = $1", id);
        Eventually.until("the heartbeat found the lease lost", WAIT, () -> engine.queueStats().get(0).leasesLost() == 1);
        assertThat(Sql.query(db, "SELECT status || ' ' || coalesce((lease_expires_at < now())::text, '-') || ' ' || attempt"
                + " FROM {schema}.durable_instances_all WHERE id = $1", row -> row.get(0, String.class), id))
                .containsExactly("executing true 1");

        assertThat(engine.maintenance().orElseThrow().reap().block()).isEqualTo(1);
        engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(runs.get()).isEqualTo(2);
        hold.tryEmitEmpty();
    }

    /**
     * A step that goes on inline commits on its claim and renews the lease, but not a lapsed one:
     * its transition commits and the next step goes through the queue, on a new claim.
     */
    @Test
    void anInlineStepOnALapsedLeaseGoesOnThroughTheQueue() {
        Sinks.Empty<Void> hold = Sinks.empty();
        List<Integer> attemptsOfB = new CopyOnWriteArrayList<>();
        AtomicBoolean inA = new AtomicBoolean();
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("lapsing", String.class).queue("lapsing")
                .step("a", ctx -> Mono.fromRunnable(() -> inA.set(true))
                        .then(hold.asMono()).thenReturn(Outcome.next("b", ctx.state() + "a").inline()))
                .step("b", ctx -> Mono.fromSupplier(() -> {
                    attemptsOfB.add(ctx.attempt());
                    return Outcome.<String>done(ctx.state() + "b");
                }))
                .build();
        // Beats 20 s apart and no reaper: nothing but the commit meets the lapsed lease.
        DurableEngine engine = engines.start(engines.options("lapsing").leaseTtl(Duration.ofSeconds(60))
                .heartbeatInterval(Duration.ofSeconds(20)).reaperInterval(Duration.ofHours(1))
                .queue(QueueOptions.builder("lapsing").pollInterval(Duration.ofMillis(100)).build()), flow);
        long id = engine.insert(JobRequest.of("lapsing", "")).block();
        Eventually.until("in step a", WAIT, inA::get);
        Sql.update(db, "UPDATE {schema}.durable_instances SET lease_expires_at = now() - interval '1 second'"
                + " WHERE id = $1", id);
        hold.tryEmitEmpty();

        engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(engine.get(id).block().result(String.class)).isEqualTo("ab");
        // Step b ran on a claim of its own, taken by a second pick, not inline on the lapsed one,
        // with a fresh attempt budget as a queued step has.
        assertThat(engine.queueStats().get(0).picked()).isEqualTo(2);
        assertThat(attemptsOfB).containsExactly(1);
        assertThat(engine.queueStats().get(0).leasesLost()).isZero();
    }

    @Test
    void aKeyAnotherTransactionIsClaimingIsSkippedNotWaitedOn() {
        DurableEngine engine = engines.start(engines.options("hot")
                .queue(QueueOptions.builder("hot").concurrency(4).pollInterval(Duration.ofMillis(100)).build()),
                quick("hot"));
        List<Long> keyed = engine.insertAll(List.of(JobRequest.of("quick", "k1").concurrencyKey("hot-key").runIn(Duration.ofHours(1)),
                JobRequest.of("quick", "k2").concurrencyKey("hot-key").runIn(Duration.ofHours(1)))).block();
        // Another pick is claiming the key: it holds the key's claim lock and has claimed one row,
        // not committed yet.
        Connection other = Mono.from(db.connectionFactory().create()).block(WAIT);
        java.util.concurrent.CompletableFuture<Long> due;
        try {
            Mono.from(other.beginTransaction()).block(WAIT);
            Flux.from(other.createStatement("SELECT pg_advisory_xact_lock(hashtextextended('hot-key', 0))").execute())
                    .flatMap(result -> result.map(row -> 1)).blockLast(WAIT);
            Flux.from(other.createStatement("UPDATE \"" + db.schema() + "\".durable_instances SET status = 'executing',"
                            + " claimed_by = 'other-pick', lease_expires_at = now() + interval '1 minute', attempt = 1"
                            + " WHERE id = $1").bind(0, keyed.get(0)).execute())
                    .flatMap(result -> result.getRowsUpdated()).blockLast(WAIT);
            // The key's second row waits behind its head (key_waiting); coming due, it is elected
            // over the future head, and that election waits for the claiming transaction's row lock
            // (a real pick's is held for one statement): it runs aside and completes after the rollback.
            due = Mono.fromCallable(() -> Sql.update(db,
                            "UPDATE {schema}.durable_instances SET eligible_at = now() WHERE id = $1", keyed.get(1)))
                    .subscribeOn(reactor.core.scheduler.Schedulers.boundedElastic()).toFuture();

            // The engine's picks skip the key instead of waiting on the other transaction (or failing):
            // unrelated rows, picked alongside, run while it stays open.
            List<Long> unrelated = engine.insertAll(List.of(JobRequest.of("quick", "u1"), JobRequest.of("quick", "u2")))
                    .block();
            for (long id : unrelated) {
                engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
            }
            assertThat(engine.get(keyed.get(1)).block().status()).isEqualTo(InstanceStatus.RUNNABLE);
            assertThat(engine.queueStats().get(0).pickFailures()).isZero();
        } finally {
            Mono.from(other.rollbackTransaction()).block(WAIT);
            Mono.from(other.close()).block(WAIT);
        }
        // The other claim rolled back: the key is free and its due row runs.
        assertThat(due.join()).isEqualTo(1L);
        engines.awaitStatus(engine, keyed.get(1), InstanceStatus.DONE, WAIT);
    }

    @Test
    void userCodeAndJsonDecodingNeverRunOnTheDatabaseEventLoops() {
        List<String> threads = new CopyOnWriteArrayList<>();
        JsonCodec recording = new JsonCodec() {
            private final JacksonJsonCodec jackson = new JacksonJsonCodec();

            @Override
            public String encode(Object value) {
                return jackson.encode(value);
            }

            @Override
            public <T> T decode(String json, Class<T> type) {
                threads.add("decode " + Thread.currentThread().getName());
                return jackson.decode(json, type);
            }
        };
        JobDefinition<String, String> job = JobDefinition.of("where", String.class, (String s) -> {
            threads.add("handler " + Thread.currentThread().getName());
            return Mono.just(s);
        }).queue("threads");
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("flow-where", String.class).queue("threads")
                .step("only", ctx -> {
                    threads.add("step " + Thread.currentThread().getName());
                    return Mono.just(Outcome.done(ctx.state()));
                }).build();
        DurableEngine engine = engines.start(engines.options("threads").codec(recording)
                .queue(QueueOptions.builder("threads").concurrency(4).pollInterval(Duration.ofMillis(100)).build()),
                job, flow);
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            ids.add(engine.insert(JobRequest.of(i % 2 == 0 ? "where" : "flow-where", "x" + i)).block());
        }
        for (long id : ids) {
            engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        }
        assertThat(threads).hasSizeGreaterThanOrEqualTo(20);
        assertThat(threads).noneMatch(thread -> thread.contains("reactor-tcp") || thread.contains("epoll")
                || thread.contains("nio"));
    }

    @Test
    void workNoLiveEngineRunsIsVisibleAndTheRegistryFollowsEnginesInAndOut() {
        DurableEngine producer = engines.start(engines.options("producer"), quick("orphaned"));
        DurableEngine worker = engines.start(engines.options("registered")
                .queue(QueueOptions.builder("served").pollInterval(Duration.ofMillis(100)).build()), quick("served"));
        List<LiveEngine> live = producer.liveEngines().collectList().block();
        assertThat(live).extracting(LiveEngine::name).contains("producer", "registered");
        LiveEngine registered = live.stream().filter(engine -> engine.name().equals("registered")).findFirst().orElseThrow();
        assertThat(registered.queues()).containsExactly("served");
        assertThat(registered.types()).containsEntry("quick", 1);

        producer.insert(JobRequest.of("quick", "nobody runs me")).block(); // queue 'orphaned'
        // (Other tests of this class leave rows in queues nobody serves now: look at this one only.)
        List<UnservedWork> unserved = producer.unservedWork().filter(work -> work.queue().equals("orphaned"))
                .collectList().block();
        assertThat(unserved).singleElement().satisfies(work -> {
            assertThat(work.queue()).isEqualTo("orphaned");
            assertThat(work.reason()).isEqualTo(UnservedWork.Reason.NO_ENGINE_SERVES_QUEUE);
            assertThat(work.instances()).isEqualTo(1);
        });

        worker.closeLater().block(WAIT);
        assertThat(producer.liveEngines().collectList().block()).extracting(LiveEngine::name)
                .doesNotContain("registered");
    }

    @Test
    void aJoinsChildrenTravelWithTheJoinOnlyNotWithEveryLaterStepOfTheParent() {
        List<Integer> childrenSeen = new CopyOnWriteArrayList<>();
        WorkflowDefinition<String> parent = WorkflowDefinition.builder("fan", String.class).queue("joins")
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(List.of(JobRequest.of("quick", "c1"),
                        JobRequest.of("quick", "c2")), "join", ctx.state())))
                .step("join", ctx -> {
                    childrenSeen.add(ctx.children().size());
                    return Mono.just(Outcome.next("later", ctx.state()));
                })
                .step("later", ctx -> {
                    childrenSeen.add(ctx.children().size());
                    return Mono.just(Outcome.done(null));
                })
                .build();
        DurableEngine engine = engines.start(engines.options("joiner")
                .queue(QueueOptions.builder("joins").concurrency(4).pollInterval(Duration.ofMillis(100)).build()),
                parent, quick("joins"));
        long id = engine.insert(JobRequest.of("fan", "p")).block();
        assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
        assertThat(childrenSeen).containsExactly(2, 0);
    }

    @Test
    void anEngineThatStoppedRefreshingItsEntryDropsOutOfTheFleet() {
        DurableEngine engine = engines.start(engines.options("observer"));
        Sql.update(db, "INSERT INTO {schema}.durable_engines (origin, name, queues, types, versions, expires_at)"
                + " VALUES ('crashed@host#1-x', 'crashed', ARRAY['q'], ARRAY['t'], ARRAY[1], now() - interval '1 second')");
        assertThat(engine.liveEngines().collectList().block()).extracting(LiveEngine::name)
                .contains("observer").doesNotContain("crashed");
    }

    @Test
    void anInboxIsBoundedAndAFullOneRefusesSignalsTyped() {
        WorkflowDefinition<String> waiter = WorkflowDefinition.builder("waiter", String.class).queue("inbox")
                .step("wait", ctx -> Mono.just(Outcome.await(Set.of("never"), "wait", ctx.state())))
                .build();
        DurableEngine engine = engines.start(engines.options("inboxer").maxInboxSignals(3)
                .queue(QueueOptions.builder("inbox").pollInterval(Duration.ofMillis(100)).build()), waiter);
        long id = engine.insert(JobRequest.of("waiter", "s")).block();
        engines.awaitStatus(engine, id, InstanceStatus.AWAITING_SIGNAL, WAIT);
        for (int i = 0; i < 3; i++) {
            assertThat(engine.signal(id, "noise", i, null).block()).isEqualTo(SignalResult.DELIVERED);
        }
        assertThatThrownBy(() -> engine.signal(id, "noise", 4, null).block())
                .isInstanceOf(InboxFullException.class).hasMessageContaining("3 unconsumed signals");
        assertThat(Sql.count(db, "id = " + id + " AND has_signals")).isEqualTo(1);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_signals WHERE instance_id = $1",
                row -> row.get(0, Long.class), id)).containsExactly(3L);
    }
}
