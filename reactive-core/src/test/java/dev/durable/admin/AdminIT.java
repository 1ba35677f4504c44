package dev.durable.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.Backoff;
import dev.durable.CancelResult;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.NoTargetException;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.SignalResult;
import dev.durable.WorkflowDefinition;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/** The admin API on the real database: every filter, paging, counts, detail, each action and its errors. */
@ExtendWith(PostgresExtension.class)
class AdminIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    public record Order(String customer, int amount) {
    }

    private EngineOptions.Builder worker(String name, String... queues) {
        EngineOptions.Builder options = engines.options(name);
        for (String queue : queues) {
            options.queue(QueueOptions.builder(queue).concurrency(4).pollInterval(Duration.ofMillis(100))
                    .maxPollInterval(Duration.ofMillis(300)).build());
        }
        return options;
    }

    /** An engine that runs no queue: what it inserts stays put. */
    private DurableEngine producer(String name) {
        return engines.start(engines.options(name));
    }

    private static List<Long> ids(Page<Instance> page) {
        return page.items().stream().map(Instance::id).toList();
    }

    private static List<Long> all(DurableAdmin admin, InstanceFilter filter, PageRequest first) {
        List<Long> ids = new ArrayList<>();
        Page<Instance> page = admin.list(filter, first).block(WAIT);
        ids.addAll(ids(page));
        while (page.hasNext()) {
            page = admin.list(filter, first.after(page.next())).block(WAIT);
            ids.addAll(ids(page));
        }
        return ids;
    }

    private static Set<Long> matching(DurableAdmin admin, Function<InstanceFilter.Builder, InstanceFilter.Builder> f) {
        return new HashSet<>(all(admin, f.apply(InstanceFilter.builder()).build(), PageRequest.oldestFirst(50)));
    }

    @Test
    void everyFilterMatchesLiveAndSettledRows() {
        JobDefinition<Order, String> ok = JobDefinition.of("f-ok", Order.class, (Order o) -> Mono.just("ok " + o.customer()))
                .queue("f-run");
        JobDefinition<Order, String> bad = JobDefinition.of("f-bad", Order.class,
                (Order o) -> Mono.<String>error(new IllegalStateException("Card Declined for " + o.customer())))
                .queue("f-run").maxAttempts(1);
        DurableEngine producer = engines.start(engines.options("f-producer"), ok, bad);
        DurableAdmin admin = producer.admin();
        Instant before = producer.get(producer.insert(JobRequest.of("f-ok", new Order("x", 0)).queue("f-mark"))
                .block()).block().insertedAt();
        // Live: parked in queues nobody runs.
        long liveA = producer.insert(JobRequest.of("f-ok", new Order("ann", 10)).queue("f-idle")
                .correlationKey("order/1/a")).block();
        long liveB = producer.insert(JobRequest.of("f-bad", new Order("bob", 20)).queue("f-idle")
                .correlationKey("order/2/b").runIn(Duration.ofHours(2))).block();
        // Settled: done and failed through a worker.
        long doneC = producer.insert(JobRequest.of("f-ok", new Order("cid", 30)).correlationKey("order/3/c")).block();
        long failedD = producer.insert(JobRequest.of("f-bad", new Order("dan", 40)).correlationKey("other/4")).block();
        DurableEngine runner = engines.start(worker("f-runner", "f-run"), ok, bad);
        engines.awaitSettled(runner, doneC, WAIT);
        engines.awaitSettled(runner, failedD, WAIT);
        Instant after = Instant.now().plusSeconds(3600 * 24);

        assertThat(matching(admin, f -> f.queue("f-idle"))).containsExactlyInAnyOrder(liveA, liveB);
        assertThat(matching(admin, f -> f.queue("f-idle", "f-run"))).containsExactlyInAnyOrder(liveA, liveB, doneC,
                failedD);
        assertThat(matching(admin, f -> f.queue("f-idle", "f-run").type("f-bad"))).containsExactlyInAnyOrder(liveB,
                failedD);
        assertThat(matching(admin, f -> f.queue("f-run").type("f-ok", "f-bad"))).containsExactlyInAnyOrder(doneC,
                failedD);
        assertThat(matching(admin, f -> f.status(InstanceStatus.FAILED).queue("f-run"))).containsExactly(failedD);
        assertThat(matching(admin, f -> f.status(InstanceStatus.DONE, InstanceStatus.RUNNABLE).queue("f-idle", "f-run")))
                .containsExactlyInAnyOrder(liveA, liveB, doneC);
        assertThat(matching(admin, f -> f.status(InstanceStatus.RUNNABLE).queue("f-run"))).isEmpty();
        assertThat(matching(admin, f -> f.correlationKey("order/3/c"))).containsExactly(doneC);
        assertThat(matching(admin, f -> f.correlationKey("order/"))).isEmpty();
        assertThat(matching(admin, f -> f.correlationKeyPrefix("order/"))).containsExactlyInAnyOrder(liveA, liveB,
                doneC);
        assertThat(matching(admin, f -> f.correlationKeyPrefix("order/2"))).containsExactly(liveB);
        assertThat(matching(admin, f -> f.stateContains("{\"customer\": \"bob\"}"))).containsExactly(liveB);
        assertThat(matching(admin, f -> f.stateContains("{\"amount\": 30}"))).containsExactly(doneC);
        assertThat(matching(admin, f -> f.errorContains("card declined"))).containsExactly(failedD);
        assertThat(matching(admin, f -> f.errorContains("DAN"))).containsExactly(failedD);
        assertThat(matching(admin, f -> f.queue("f-idle", "f-run").insertedBetween(before, after)))
                .containsExactlyInAnyOrder(liveA, liveB, doneC, failedD);
        assertThat(matching(admin, f -> f.queue("f-idle", "f-run").insertedBetween(null, before))).isEmpty();
        Instant settledAt = runner.get(doneC).block().updatedAt();
        assertThat(matching(admin, f -> f.queue("f-run").updatedBetween(settledAt, null))).contains(doneC);
        assertThat(matching(admin, f -> f.queue("f-run").updatedBetween(null, settledAt))).doesNotContain(doneC);
        Instant soon = Instant.now().plusSeconds(3600);
        assertThat(matching(admin, f -> f.queue("f-idle").eligibleBetween(soon, null))).containsExactly(liveB);
        assertThat(matching(admin, f -> f.queue("f-idle").eligibleBetween(null, soon))).containsExactly(liveA);
        // Everything at once.
        assertThat(matching(admin, f -> f.queue("f-run").type("f-bad").status(InstanceStatus.FAILED)
                .correlationKeyPrefix("other").stateContains("{\"customer\": \"dan\"}").errorContains("declined")
                .insertedBetween(before, after).updatedBetween(before, after).eligibleBetween(before, after)))
                .containsExactly(failedD);
    }

    @Test
    void pagesNeitherRepeatNorSkipWhileRowsAreInsertedAndSettle() throws Exception {
        DurableEngine producer = engines.start(engines.options("p-producer"),
                JobDefinition.of("p-job", Integer.class, (Integer i) -> Mono.just(i)).queue("paging"));
        DurableAdmin admin = producer.admin();
        List<Long> initial = producer.insertAll(IntStream.range(0, 120)
                .mapToObj(i -> JobRequest.of("p-job", i)).toList()).block(WAIT);
        // A third of them settle (a cancel moves them to the history), so pages merge both tables.
        for (int i = 0; i < initial.size(); i += 3) {
            producer.cancel(initial.get(i)).block(WAIT);
        }
        InstanceFilter filter = InstanceFilter.builder().queue("paging").build();
        for (PageRequest first : List.of(PageRequest.newestFirst(7), PageRequest.oldestFirst(7))) {
            AtomicBoolean running = new AtomicBoolean(true);
            Thread churn = new Thread(() -> {
                int n = 0;
                while (running.get()) {
                    producer.insert(JobRequest.of("p-job", 1000 + n++)).block(WAIT);
                    // Rows move from the hot table to the history while pages are read.
                    producer.cancel(initial.get(1 + 3 * (n % 39))).block(WAIT);
                }
            });
            churn.start();
            List<Long> seen;
            try {
                seen = all(admin, filter, first);
            } finally {
                running.set(false);
                churn.join();
            }
            assertThat(seen).doesNotHaveDuplicates().containsAll(initial);
            List<Long> sorted = new ArrayList<>(seen);
            sorted.sort(first.order() == PageRequest.Order.NEWEST_FIRST ? java.util.Comparator.reverseOrder()
                    : java.util.Comparator.naturalOrder());
            assertThat(seen).isEqualTo(sorted);
        }
        Page<Instance> firstPage = admin.list(filter, PageRequest.newestFirst(5)).block(WAIT);
        assertThat(firstPage.items()).hasSize(5);
        assertThat(firstPage.nextCursor()).isPresent();
        Page<Instance> last = admin.list(InstanceFilter.builder().queue("paging").build(),
                PageRequest.oldestFirst(1000)).block(WAIT);
        assertThat(last.hasNext()).isFalse();
    }

    @Test
    void countsByQueueAndStatusExactlyAndFromTheStatistics() {
        DurableEngine producer = engines.start(engines.options("c-producer"),
                JobDefinition.of("c-job", Integer.class, (Integer i) -> Mono.just(i)).queue("c-one"));
        List<Long> one = producer.insertAll(IntStream.range(0, 30).mapToObj(i -> JobRequest.of("c-job", i)).toList())
                .block(WAIT);
        producer.insertAll(IntStream.range(0, 4).mapToObj(i -> JobRequest.of("c-job", i).queue("c-two")).toList())
                .block(WAIT);
        for (long id : one.subList(0, 10)) {
            producer.cancel(id).block(WAIT);
        }
        Map<String, StatusCount> exact = counts(producer.admin().counts().block(WAIT));
        assertThat(exact.get("c-one runnable")).isEqualTo(new StatusCount("c-one", InstanceStatus.RUNNABLE, 20, false));
        assertThat(exact.get("c-one cancelled")).isEqualTo(new StatusCount("c-one", InstanceStatus.CANCELLED, 10,
                false));
        assertThat(exact.get("c-two runnable").count()).isEqualTo(4);

        // Statistics: ANALYZE samples a small table whole, so the estimate is the count.
        db.execute("ANALYZE \"" + db.schema() + "\".durable_history");
        Map<String, StatusCount> estimated = counts(producer.admin().counts(0).block(WAIT));
        assertThat(estimated.get("c-one cancelled")).isEqualTo(new StatusCount("c-one", InstanceStatus.CANCELLED, 10,
                true));
        assertThat(estimated.get("c-one runnable")).isEqualTo(new StatusCount("c-one", InstanceStatus.RUNNABLE, 20,
                false));
    }

    private static Map<String, StatusCount> counts(List<StatusCount> counts) {
        return counts.stream().collect(Collectors.toMap(c -> c.queue() + " " + c.status().sqlName(), c -> c));
    }

    // ---- Detail ---------------------------------------------------------------------------

    static JobDefinition<String, String> child(String queue) {
        return JobDefinition.of("d-child", String.class, (String s) -> Mono.just("child " + s)).queue(queue);
    }

    static WorkflowDefinition<String> parent(String queue) {
        return WorkflowDefinition.builder("d-parent", String.class).queue(queue)
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(List.of(JobRequest.of("d-child", "a"),
                        JobRequest.of("d-child", "b")), "park", ctx.state())))
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("go"), "end", ctx.state())))
                .step("end", ctx -> ctx.signals().isEmpty() ? Mono.just(Outcome.fail("no go"))
                        : Mono.just(Outcome.done(ctx.signals().get(0).name())))
                .build();
    }

    @Test
    void detailShowsChildrenInboxConsumedSignalsAndTheLastError() {
        DurableEngine engine = engines.start(worker("d-worker", "detail"), parent("detail"), child("detail"));
        DurableAdmin admin = engine.admin();
        long id = engine.insert(JobRequest.of("d-parent", "s")).block();
        Eventually.until("parked", WAIT, () -> engine.get(id).block().status() == InstanceStatus.AWAITING_SIGNAL);
        engine.signal(id, "early", "{\"n\":1}", "k1").block(WAIT);
        InstanceDetail parked = admin.detail(id).block(WAIT);
        assertThat(parked.instance().id()).isEqualTo(id);
        assertThat(parked.children()).extracting(Instance::status).containsOnly(InstanceStatus.DONE);
        assertThat(parked.children()).hasSize(2).allMatch(c -> c.parentId() == id);
        assertThat(parked.moreChildren()).isFalse();
        assertThat(parked.inbox()).extracting(InboxSignal::name).containsExactly("early");
        assertThat(parked.inbox().get(0).dedupKey()).isEqualTo("k1");
        assertThat(parked.inbox().get(0).consumedAt()).isNull();
        assertThat(parked.consumedSignals()).isEmpty();
        assertThat(parked.lastError()).isNull();

        assertThat(admin.signal(id, "go", null).block(WAIT)).isEqualTo(SignalResult.DELIVERED);
        engines.awaitSettled(engine, id, WAIT);
        InstanceDetail done = admin.detail(id).block(WAIT);
        assertThat(done.instance().status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.inbox()).isEmpty();
        assertThat(done.consumedSignals()).containsExactly("go");
        assertThat(done.children()).hasSize(2);
        assertThat(admin.detail(Long.MAX_VALUE).blockOptional(WAIT)).isEmpty();
    }

    // ---- Retry in place -------------------------------------------------------------------

    static final AtomicBoolean FLAKY = new AtomicBoolean(true);

    static WorkflowDefinition<Integer> flaky(String queue) {
        return WorkflowDefinition.builder("r-flaky", Integer.class).queue(queue).maxAttempts(2)
                .backoff(dev.durable.Backoff.fixed(Duration.ofMillis(10)))
                .step("first", ctx -> Mono.just(Outcome.next("second", ctx.state() + 1)))
                .step("second", ctx -> FLAKY.get() ? Mono.error(new IllegalStateException("downstream is down"))
                        : Mono.just(Outcome.done("finished with " + ctx.state())))
                .build();
    }

    @Test
    void retryInPlaceBringsAFailedWorkflowBackAtItsFailedStepAndItCompletes() {
        FLAKY.set(true);
        DurableEngine engine = engines.start(worker("r-worker", "retry"), flaky("retry"));
        DurableAdmin admin = engine.admin();
        long id = engine.insert(JobRequest.of("r-flaky", 41).correlationKey("flaky/1")).block();
        Instance failed = engines.awaitSettled(engine, id, WAIT);
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.step()).isEqualTo("second");
        assertThat(failed.attempt()).isEqualTo(2);
        assertThat(admin.detail(id).block(WAIT).lastError()).contains("downstream is down");
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, Long.class), id)).containsExactly(1L);

        FLAKY.set(false);
        Instance retried = admin.retry(id).block(WAIT);
        assertThat(retried.id()).isEqualTo(id);
        assertThat(retried.status()).isIn(InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING, InstanceStatus.DONE);
        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.step()).isEqualTo("second");
        assertThat(done.attempt()).isEqualTo(1);
        assertThat(done.correlationKey()).isEqualTo("flaky/1");
        assertThat(engine.codec().decode(done.resultJson(), String.class)).isEqualTo("finished with 42");
        // The same row, not a copy: one instance has the key.
        assertThat(Sql.count(db, "correlation_key = 'flaky/1'")).isEqualTo(1);

        // A done instance cannot be retried; an unknown id is no target.
        assertThatThrownBy(() -> admin.retry(id).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("instance " + id + " is done");
        assertThatThrownBy(() -> admin.retry(Long.MAX_VALUE).block(WAIT)).isInstanceOf(NoTargetException.class);
    }

    @Test
    void retryOfAKeyALiveInstanceHoldsNowIsRefusedAndLeavesTheRowSettled() {
        DurableEngine producer = engines.start(engines.options("k-producer"),
                JobDefinition.of("k-job", Integer.class, (Integer i) -> Mono.just(i)).queue("k-idle"));
        long first = producer.insert(JobRequest.of("k-job", 1).correlationKey("k/1")).block();
        producer.cancel(first).block(WAIT);
        long second = producer.insert(JobRequest.of("k-job", 2).correlationKey("k/1")).block();
        assertThatThrownBy(() -> producer.admin().retry(first).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("correlation key 'k/1'");
        assertThat(producer.get(first).block().status()).isEqualTo(InstanceStatus.CANCELLED);
        producer.cancel(second).block(WAIT);
        assertThat(producer.admin().retry(first).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
    }

    // ---- Actions by id and by filter ------------------------------------------------------

    @Test
    void actionsByIdAndTheirTypedErrors() {
        DurableEngine producer = engines.start(engines.options("a-producer"),
                JobDefinition.of("a-job", Integer.class, (Integer i) -> Mono.just(i)).queue("a-idle"));
        DurableAdmin admin = producer.admin();
        long live = producer.insert(JobRequest.of("a-job", 1)).block();
        long other = producer.insert(JobRequest.of("a-job", 2)).block();

        assertThatThrownBy(() -> admin.delete(live).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("cancel it first");
        assertThatThrownBy(() -> admin.retry(live).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("is runnable");
        assertThat(admin.cancel(live).block(WAIT)).isEqualTo(CancelResult.CANCELLED);
        assertThat(admin.cancel(live).block(WAIT)).isEqualTo(CancelResult.ALREADY_SETTLED);
        assertThatThrownBy(() -> admin.cancel(Long.MAX_VALUE).block(WAIT)).isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> admin.signal(live, "x", null).block(WAIT)).isInstanceOf(NoTargetException.class);
        assertThat(admin.signal(other, "x", 5).block(WAIT)).isEqualTo(SignalResult.DELIVERED);
        assertThat(admin.detail(other).block(WAIT).inbox()).extracting(InboxSignal::payloadJson).containsExactly("5");

        admin.delete(live).block(WAIT);
        assertThat(producer.get(live).blockOptional(WAIT)).isEmpty();
        assertThatThrownBy(() -> admin.delete(live).block(WAIT)).isInstanceOf(NoTargetException.class);

        assertThatThrownBy(() -> PageRequest.newestFirst(0)).isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> PageRequest.newestFirst(5).after("not-a-cursor"))
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> InstanceFilter.builder().stateContains("{oops")).isInstanceOf(
                InvalidRequestException.class);
        assertThatThrownBy(() -> InstanceFilter.builder().queue("")).isInstanceOf(InvalidRequestException.class);
        Instant now = Instant.now();
        assertThatThrownBy(() -> InstanceFilter.builder().insertedBetween(now, now).build())
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> admin.cancelAll(InstanceFilter.all(), 0).block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
    }

    static WorkflowDefinition<Integer> waiter(String queue) {
        return WorkflowDefinition.builder("b-waiter", Integer.class).queue(queue)
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("wake"), "end", ctx.state())))
                .step("end", ctx -> Mono.just(Outcome.done(ctx.state())))
                .build();
    }

    @Test
    void bulkActionsByFilterRunInBatchesAndCount() {
        FLAKY.set(true);
        DurableEngine engine = engines.start(worker("b-worker", "bulk-flaky", "bulk-wait"), flaky("bulk-flaky"),
                waiter("bulk-wait"));
        DurableEngine producer = engines.start(engines.options("b-producer"),
                JobDefinition.of("b-job", Integer.class, (Integer i) -> Mono.just(i)).queue("bulk-idle"));
        DurableAdmin admin = producer.admin();

        // Retry by filter: seven failed workflows (a dead-letter view) come back and complete.
        List<Long> flakyIds = engine.insertAll(IntStream.range(0, 7).mapToObj(i -> JobRequest.of("r-flaky", i))
                .toList()).block(WAIT);
        flakyIds.forEach(id -> engines.awaitSettled(engine, id, WAIT));
        InstanceFilter deadLetters = InstanceFilter.builder().queue("bulk-flaky").status(InstanceStatus.FAILED).build();
        assertThat(all(admin, deadLetters, PageRequest.newestFirst(3))).containsExactlyInAnyOrderElementsOf(flakyIds);
        FLAKY.set(false);
        BulkResult retried = admin.retryAll(deadLetters, null, 3).block(WAIT);
        assertThat(retried).isEqualTo(new BulkResult(7, 7, 3));
        flakyIds.forEach(id -> assertThat(engines.awaitSettled(engine, id, WAIT).status())
                .isEqualTo(InstanceStatus.DONE));
        assertThat(admin.retryAll(deadLetters).block(WAIT).affected()).isZero();

        // Signal by filter: five parked workflows wake and finish.
        List<Long> waiting = engine.insertAll(IntStream.range(0, 5).mapToObj(i -> JobRequest.of("b-waiter", i))
                .toList()).block(WAIT);
        waiting.forEach(id -> Eventually.until("parked", WAIT,
                () -> engine.get(id).block().status() == InstanceStatus.AWAITING_SIGNAL));
        BulkResult signalled = admin.signalAll(InstanceFilter.builder().queue("bulk-wait").build(), "wake", null, 2)
                .block(WAIT);
        assertThat(signalled.matched()).isEqualTo(5);
        assertThat(signalled.affected()).isEqualTo(5);
        waiting.forEach(id -> assertThat(engines.awaitSettled(engine, id, WAIT).status())
                .isEqualTo(InstanceStatus.DONE));

        // Cancel by filter: only the live rows the filter names.
        List<Long> idle = producer.insertAll(IntStream.range(0, 11).mapToObj(i -> JobRequest.of("b-job", i)
                .priority(i % 2)).toList()).block(WAIT);
        InstanceFilter odd = InstanceFilter.builder().queue("bulk-idle").stateContains("1").build();
        assertThat(admin.cancelAll(odd).block(WAIT).affected()).isEqualTo(1);
        BulkResult cancelled = admin.cancelAll(InstanceFilter.builder().queue("bulk-idle").build(), 4).block(WAIT);
        assertThat(cancelled).isEqualTo(new BulkResult(10, 10, 3));
        assertThat(idle).allMatch(id -> producer.get(id).block().status() == InstanceStatus.CANCELLED);

        // Delete by filter: settled rows go, live ones stay.
        long live = producer.insert(JobRequest.of("b-job", 99)).block();
        BulkResult deleted = admin.deleteAll(InstanceFilter.builder().queue("bulk-idle").build(), 5).block(WAIT);
        assertThat(deleted).isEqualTo(new BulkResult(11, 11, 3));
        assertThat(all(admin, InstanceFilter.builder().queue("bulk-idle").build(), PageRequest.oldestFirst(10)))
                .containsExactly(live);
        BulkResult none = admin.deleteAll(InstanceFilter.builder().queue("bulk-idle")
                .status(InstanceStatus.RUNNABLE).build()).block(WAIT);
        assertThat(none).isEqualTo(new BulkResult(0, 0, 0));
    }

    @Test
    void aPrefixEndsAtTheNextCodePointInByteOrder() {
        DurableEngine producer = engines.start(engines.options("x-producer"),
                JobDefinition.of("x-job", Integer.class, (Integer i) -> Mono.just(i)).queue("x-idle"));
        DurableAdmin admin = producer.admin();
        long acute = producer.insert(JobRequest.of("x-job", 1).correlationKey("x/caf\u00e9/1")).block();
        long circumflex = producer.insert(JobRequest.of("x-job", 2).correlationKey("x/caf\u00ea/2")).block();
        long emoji = producer.insert(JobRequest.of("x-job", 3).correlationKey("x/\uD83D\uDE00/3")).block();
        producer.cancel(circumflex).block(WAIT);
        assertThat(matching(admin, f -> f.correlationKeyPrefix("x/caf\u00e9"))).containsExactly(acute);
        assertThat(matching(admin, f -> f.correlationKeyPrefix("x/caf"))).containsExactlyInAnyOrder(acute,
                circumflex);
        assertThat(matching(admin, f -> f.correlationKeyPrefix("x/\uD83D\uDE00"))).containsExactly(emoji);
        assertThat(matching(admin, f -> f.correlationKeyPrefix("x/"))).containsExactlyInAnyOrder(acute, circumflex,
                emoji);
    }

    @Test
    void aFailedInstanceWhoseKeyStaysOccupiedIsRetriedInTheHotTable() {
        FLAKY.set(true);
        DurableEngine engine = engines.start(worker("h-worker", "hot-retry"), flaky("hot-retry"));
        long id = engine.insert(JobRequest.of("r-flaky", 1).correlationKey("hot/1",
                java.util.EnumSet.allOf(InstanceStatus.class))).block();
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        // The key stays occupied in every status: the failed row stays in the hot table.
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE id = $1",
                row -> row.get(0, Long.class), id)).containsExactly(1L);
        assertThat(matching(engine.admin(), f -> f.correlationKey("hot/1").status(InstanceStatus.FAILED)))
                .containsExactly(id);
        FLAKY.set(false);
        assertThat(engine.admin().retry(id).block(WAIT).id()).isEqualTo(id);
        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.attempt()).isEqualTo(1);
    }

    static WorkflowDefinition<String> family(String queue) {
        return WorkflowDefinition.builder("w-family", String.class).queue(queue)
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(List.of(
                        JobRequest.of("w-doomed", "x").maxAttempts(1), JobRequest.of("w-waiter", 0)), "join",
                        ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done("joined")))
                .build();
    }

    @Test
    void aSettledChildWhoseParentStillWaitsIsNeitherRetriedNorDeleted() {
        DurableEngine engine = engines.start(worker("w-worker", "family"), family("family"),
                JobDefinition.of("w-doomed", String.class, (String s) -> Mono.<String>error(
                        new IllegalStateException("doomed"))).queue("family"),
                WorkflowDefinition.builder("w-waiter", Integer.class).queue("family")
                        .step("park", ctx -> Mono.just(Outcome.await(Set.of("wake"), "end", ctx.state())))
                        .step("end", ctx -> Mono.just(Outcome.done(ctx.state())))
                        .build());
        DurableAdmin admin = engine.admin();
        long parent = engine.insert(JobRequest.of("w-family", "p")).block();
        InstanceDetail[] detail = new InstanceDetail[1];
        Eventually.until("a child failed and the other parked", WAIT, () -> {
            detail[0] = admin.detail(parent).block(WAIT);
            return detail[0].children().size() == 2 && detail[0].children().stream().anyMatch(
                    c -> c.status() == InstanceStatus.FAILED) && detail[0].children().stream().anyMatch(
                    c -> c.status() == InstanceStatus.AWAITING_SIGNAL);
        });
        assertThat(detail[0].instance().status()).isEqualTo(InstanceStatus.AWAITING_CHILDREN);
        long doomed = detail[0].children().stream().filter(c -> c.status() == InstanceStatus.FAILED).findFirst()
                .orElseThrow().id();
        assertThatThrownBy(() -> admin.retry(doomed).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("parent still waits");
        assertThatThrownBy(() -> admin.delete(doomed).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("parent still waits");
        assertThat(admin.retryAll(InstanceFilter.builder().parentId(parent).build()).block(WAIT))
                .isEqualTo(new BulkResult(1, 0, 1));
        // Once the parent has joined, its failed child may go.
        assertThat(admin.signalAll(InstanceFilter.builder().parentId(parent).build(), "wake", null).block(WAIT)
                .affected()).isEqualTo(1);
        assertThat(engines.awaitSettled(engine, parent, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        admin.delete(doomed).block(WAIT);
        assertThat(admin.detail(parent).block(WAIT).children()).hasSize(1);
    }

    @Test
    void aClosedEnginesAdminRefusesEveryCall() {
        DurableEngine engine = producer("closed");
        engine.closeLater().block(WAIT);
        DurableAdmin admin = engine.admin();
        assertThatThrownBy(() -> admin.list(InstanceFilter.all(), PageRequest.newestFirst(5)).block(WAIT))
                .isInstanceOf(dev.durable.EngineClosedException.class);
        assertThatThrownBy(() -> admin.counts().block(WAIT)).isInstanceOf(dev.durable.EngineClosedException.class);
        assertThatThrownBy(() -> admin.retry(1).block(WAIT)).isInstanceOf(dev.durable.EngineClosedException.class);
        assertThatThrownBy(() -> admin.deleteAll(InstanceFilter.all()).block(WAIT))
                .isInstanceOf(dev.durable.EngineClosedException.class);
        assertThatThrownBy(() -> admin.limits().block(WAIT)).isInstanceOf(dev.durable.EngineClosedException.class);
    }

    @Test
    void searchIndexesAreOptInIdempotentAndSearchesAreExactWithoutThem() {
        JobDefinition<Order, String> ok = JobDefinition.of("s-ok", Order.class, (Order o) -> Mono.just("ok"))
                .queue("s-run");
        DurableEngine engine = engines.start(worker("s-runner", "s-run"), ok);
        DurableAdmin admin = engine.admin();
        List<Long> done = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            done.add(engine.insert(JobRequest.of("s-ok", new Order("c" + i, i))).block(WAIT));
        }
        done.forEach(id -> engines.awaitSettled(engine, id, WAIT));
        // The schema creates neither: each settled job would pay for them.
        assertThat(admin.searchIndexes().block(WAIT)).isEmpty();
        assertThat(matching(admin, f -> f.stateContains("{\"customer\": \"c3\"}"))).containsExactly(done.get(3));
        assertThat(matching(admin, f -> f.type("s-ok"))).containsExactlyInAnyOrderElementsOf(done);

        admin.createSearchIndexes(Set.of(SearchIndex.TYPE, SearchIndex.ARGS)).block(WAIT);
        admin.createSearchIndexes(Set.of(SearchIndex.ARGS)).block(WAIT);
        assertThat(admin.searchIndexes().block(WAIT)).containsExactlyInAnyOrder(SearchIndex.TYPE, SearchIndex.ARGS);
        assertThat(matching(admin, f -> f.stateContains("{\"customer\": \"c3\"}"))).containsExactly(done.get(3));
        assertThat(matching(admin, f -> f.type("s-ok"))).containsExactlyInAnyOrderElementsOf(done);

        // A build that failed midway leaves an invalid index: it is built again.
        Sql.update(db, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = '\"" + db.schema()
                + "\".durable_history_state_idx'::regclass");
        assertThat(admin.searchIndexes().block(WAIT)).containsExactly(SearchIndex.TYPE);
        admin.createSearchIndexes(Set.of(SearchIndex.ARGS)).block(WAIT);
        assertThat(admin.searchIndexes().block(WAIT)).containsExactlyInAnyOrder(SearchIndex.TYPE, SearchIndex.ARGS);

        admin.dropSearchIndexes(Set.of(SearchIndex.TYPE, SearchIndex.ARGS)).block(WAIT);
        admin.dropSearchIndexes(Set.of(SearchIndex.TYPE)).block(WAIT);
        assertThat(admin.searchIndexes().block(WAIT)).isEmpty();
        assertThatThrownBy(() -> admin.createSearchIndexes(Set.of(SearchIndex.TYPE), Duration.ZERO).block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
    }

    @Test
    void attemptsThatEndedUnsuccessfullyAreRecordedAndPrunedWithTheInstance() {
        AtomicInteger runs = new AtomicInteger();
        JobDefinition<String, String> flaky = JobDefinition.of("a-flaky", String.class, (String s) ->
                        runs.incrementAndGet() <= 2 ? Mono.<String>error(new IllegalStateException("boom " + runs.get()))
                                : Mono.just("ok"))
                .queue("a-run").maxAttempts(5).backoff(Backoff.fixed(Duration.ofMillis(10)));
        JobDefinition<String, String> plain = JobDefinition.of("a-plain", String.class, (String s) -> Mono.just(s))
                .queue("a-run");
        DurableEngine engine = engines.start(worker("a-runner", "a-run").runMaintenance(false)
                .retention(Duration.ofHours(1)), flaky, plain);
        DurableAdmin admin = engine.admin();
        long retried = engine.insert(JobRequest.of("a-flaky", "x")).block(WAIT);
        long once = engine.insert(JobRequest.of("a-plain", "y")).block(WAIT);
        engines.awaitSettled(engine, retried, WAIT);
        engines.awaitSettled(engine, once, WAIT);

        List<Attempt> attempts = admin.detail(retried).block(WAIT).attempts();
        assertThat(attempts).extracting(Attempt::attempt, Attempt::outcome).containsExactly(
                org.assertj.core.groups.Tuple.tuple(1, Attempt.Outcome.RETRIED),
                org.assertj.core.groups.Tuple.tuple(2, Attempt.Outcome.RETRIED),
                org.assertj.core.groups.Tuple.tuple(3, Attempt.Outcome.DONE));
        assertThat(attempts.get(0).error()).contains("boom 1");
        assertThat(attempts.get(1).error()).contains("boom 2");
        assertThat(attempts.get(0).worker()).startsWith("a-runner");
        assertThat(attempts.get(0).startedAt()).isBeforeOrEqualTo(attempts.get(0).finishedAt());
        assertThat(attempts.get(2).finishedAt()).isNotNull();
        // A job that succeeds at once writes no attempt row: its own row is its only attempt.
        assertThat(Sql.query(db, "SELECT count(*) AS n FROM {schema}.durable_attempts WHERE instance_id = $1",
                row -> row.get("n", Long.class), once)).containsExactly(0L);
        assertThat(admin.detail(once).block(WAIT).attempts()).extracting(Attempt::outcome)
                .containsExactly(Attempt.Outcome.DONE);

        // A lease lost to the reaper, in a queue nobody runs.
        long lost = engine.insert(JobRequest.of("a-plain", "z").queue("a-idle")).block(WAIT);
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'dead-worker',"
                + " attempt = 1, lease_expires_at = now() - interval '1 second' WHERE id = $1", lost);
        assertThat(admin.detail(lost).block(WAIT).attempts()).extracting(Attempt::outcome, Attempt::worker)
                .containsExactly(org.assertj.core.groups.Tuple.tuple(Attempt.Outcome.RUNNING, "dead-worker"));
        assertThat(engine.maintenance().orElseThrow().reap().block(WAIT)).isEqualTo(1);
        List<Attempt> reaped = admin.detail(lost).block(WAIT).attempts();
        assertThat(reaped).extracting(Attempt::attempt, Attempt::outcome, Attempt::worker).containsExactly(
                org.assertj.core.groups.Tuple.tuple(1, Attempt.Outcome.LEASE_LOST, "dead-worker"));
        assertThat(reaped.get(0).error()).contains("lost: its lease expired");

        // GC takes the attempts with the instance; delete does too.
        Sql.update(db, "UPDATE {schema}.durable_history SET settled_at = now() - interval '2 hours' WHERE id = $1",
                retried);
        assertThat(engine.maintenance().orElseThrow().collectGarbage().block(WAIT)).isEqualTo(1);
        assertThat(Sql.query(db, "SELECT count(*) AS n FROM {schema}.durable_attempts WHERE instance_id = $1",
                row -> row.get("n", Long.class), retried)).containsExactly(0L);
        admin.cancel(lost).block(WAIT);
        admin.delete(lost).block(WAIT);
        assertThat(Sql.query(db, "SELECT count(*) AS n FROM {schema}.durable_attempts WHERE instance_id = $1",
                row -> row.get("n", Long.class), lost)).containsExactly(0L);
    }

    @Test
    void runNowAndPriorityByIdAndByFilterWithTheirGuards() {
        DurableEngine producer = engines.start(engines.options("p-producer"),
                JobDefinition.of("p-job", String.class, (String s) -> Mono.just(s)));
        DurableAdmin admin = producer.admin();
        long later = producer.insert(JobRequest.of("p-job", "a").queue("p-idle").runIn(Duration.ofHours(1)))
                .block(WAIT);
        long due = producer.insert(JobRequest.of("p-job", "b").queue("p-idle")).block(WAIT);
        Instant dueAt = producer.get(due).block(WAIT).eligibleAt();
        assertThat(admin.runNow(later).block(WAIT).eligibleAt()).isBefore(Instant.now().plusSeconds(60));
        // One already due keeps its place in the queue.
        assertThat(admin.runNow(due).block(WAIT).eligibleAt()).isEqualTo(dueAt);

        assertThat(admin.setPriority(later, -5).block(WAIT).priority()).isEqualTo(-5);
        assertThatThrownBy(() -> admin.setPriority(later, JobRequest.MAX_PRIORITY + 1).block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> admin.runNow(123_456_789L).block(WAIT)).isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> admin.setPriority(123_456_789L, 1).block(WAIT)).isInstanceOf(NoTargetException.class);

        List<Long> batch = IntStream.range(0, 7).mapToObj(i -> producer.insert(JobRequest.of("p-job", "c" + i)
                .queue("p-bulk").runIn(Duration.ofHours(2))).block(WAIT)).toList();
        InstanceFilter bulk = InstanceFilter.builder().queue("p-bulk").build();
        BulkResult prioritised = admin.setPriorityAll(bulk, 9, 3).block(WAIT);
        assertThat(prioritised.affected()).isEqualTo(7);
        assertThat(prioritised.batches()).isEqualTo(3);
        BulkResult ranNow = admin.runNowAll(bulk, 3).block(WAIT);
        assertThat(ranNow.affected()).isEqualTo(7);
        batch.forEach(id -> {
            Instance row = producer.get(id).block(WAIT);
            assertThat(row.priority()).isEqualTo(9);
            assertThat(row.eligibleAt()).isBefore(Instant.now().plusSeconds(60));
        });

        // Settled: neither applies.
        producer.cancel(due, true).block(WAIT);
        assertThatThrownBy(() -> admin.runNow(due).block(WAIT)).isInstanceOf(InstanceStateException.class)
                .hasMessageContaining("retry");
        assertThatThrownBy(() -> admin.setPriority(due, 3).block(WAIT)).isInstanceOf(InstanceStateException.class);
    }

    @Test
    void limitsShowLiveGateClaimsPerKeyAndSpentBuckets() {
        reactor.core.publisher.Sinks.Empty<Void> release = reactor.core.publisher.Sinks.empty();
        JobDefinition<String, String> held = JobDefinition.of("l-held", String.class,
                (String s) -> release.asMono().thenReturn("released")).queue("l-run");
        JobDefinition<String, String> quick = JobDefinition.of("l-quick", String.class, (String s) -> Mono.just("ok"))
                .queue("l-run");
        // The rate refills a token in about 17 minutes: a spent bucket stays visibly short while the test reads it.
        DurableEngine engine = engines.start(worker("l-runner", "l-run").gate("lg", 2).rateLimit("lr", 0.001, 5),
                held, quick);
        DurableAdmin admin = engine.admin();
        List<Long> gated = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                gated.add(engine.insert(JobRequest.of("l-held", "h" + i).gate("lg", "k1")).block(WAIT));
            }
            long spent = engine.insert(JobRequest.of("l-quick", "q").rateLimit("lr", 3, "p1")).block(WAIT);
            engines.awaitSettled(engine, spent, WAIT);

            LimitUsage usage = Eventually.until("two claims of gate lg held", WAIT, () -> admin.limits().block(WAIT),
                    u -> u.gates().stream().anyMatch(g -> g.gate().equals("lg") && g.held() == 2));
            // Capacity 2: the third row waits, so exactly two are held.
            assertThat(usage.gates()).containsExactly(new GateUsage("lg", "k1", 2, 2));
            assertThat(usage.gates().get(0).fraction()).isEqualTo(1.0);
            assertThat(usage.moreGates()).isFalse();
            assertThat(usage.bucketsInLimiter()).isFalse();
            assertThat(usage.limiter()).isEqualTo("postgres");
            assertThat(usage.buckets()).hasSize(1);
            RateBucket bucket = usage.buckets().get(0);
            assertThat(bucket.limit()).isEqualTo("lr");
            assertThat(bucket.partition()).isEqualTo("p1");
            assertThat(bucket.burst()).isEqualTo(5);
            assertThat(bucket.tokens()).isGreaterThanOrEqualTo(2).isLessThan(3);
        } finally {
            release.tryEmitEmpty();
        }
        // Released, the third row runs too, and then nothing holds the gate.
        gated.forEach(id -> engines.awaitSettled(engine, id, WAIT));
        assertThat(admin.limits().block(WAIT).gates()).isEmpty();
    }

    @Test
    void anotherLimitersBucketsAreSaidToLiveInIt() {
        // Any factory but PostgresLimiter.factory() itself (here one that wraps it) keeps its buckets to itself.
        DurableEngine engine = engines.start(engines.options("l-other").rateLimit("lr", 1, 5)
                .limiter(context -> dev.durable.limit.PostgresLimiter.factory().create(context)));
        Sql.update(db, "INSERT INTO {schema}.durable_rate_buckets (name, partition_key, tokens) VALUES ('lr', 'p', 1)");
        LimitUsage usage = engine.admin().limits().block(WAIT);
        assertThat(usage.bucketsInLimiter()).isTrue();
        assertThat(usage.buckets()).isEmpty();
        assertThat(usage.limiter()).isNotEqualTo("postgres");
    }

    @Test
    void aRetriedRowRunsUnderTheGateAndRateLimitItRanUnder() {
        JobDefinition<String, String> fails = JobDefinition.of("g-fails", String.class,
                (String s) -> Mono.<String>error(new IllegalStateException("no"))).queue("g-run").maxAttempts(1);
        DurableEngine engine = engines.start(worker("g-runner", "g-run").gate("g", 2).rateLimit("r", 100, 10), fails);
        long gated = engine.insert(JobRequest.of("g-fails", "x").gate("g", "k").rateLimit("r", 2, "p")).block(WAIT);
        engines.awaitSettled(engine, gated, WAIT);
        engine.admin().retry(gated, Instant.now().plusSeconds(3600)).block(WAIT);
        assertThat(Sql.query(db, "SELECT gate_name || ' ' || concurrency_key || ' ' || rate_limit || ' ' || rate_weight"
                + " || ' ' || rate_partition AS r FROM {schema}.durable_instances WHERE id = $1",
                row -> row.get("r", String.class), gated)).containsExactly("g k r 2 p");
    }

    @Test
    void aPausedQueueIsPickedByNoEngineUntilResumed() throws Exception {
        AtomicInteger ran = new AtomicInteger();
        JobDefinition<String, String> job = JobDefinition.of("pz-job", String.class, (String s) -> {
            ran.incrementAndGet();
            return Mono.just(s);
        }).queue("pz");
        DurableEngine a = engines.start(worker("pz-a", "pz"), job);
        DurableEngine b = engines.start(worker("pz-b", "pz"), job);
        DurableAdmin admin = a.admin();
        assertThat(admin.pauseQueue("pz").block(WAIT)).isTrue();
        assertThat(admin.pauseQueue("pz").block(WAIT)).isFalse();
        assertThat(b.admin().pausedQueues().block(WAIT)).extracting(QueuePause::queue, QueuePause::pausedBy)
                .containsExactly(org.assertj.core.groups.Tuple.tuple("pz", "pz-a"));
        // Picks obey at once; claim-on-insert within a heartbeat (500 ms here): let two pass.
        Thread.sleep(1_200);
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            ids.add((i % 2 == 0 ? a : b).insert(JobRequest.of("pz-job", "x" + i)).block(WAIT));
        }
        Thread.sleep(1_500);
        assertThat(ran.get()).isZero();
        ids.forEach(id -> assertThat(a.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE));
        assertThat(admin.counts(0).block(WAIT)).contains(new StatusCount("pz", InstanceStatus.RUNNABLE, 10, false));

        assertThat(b.admin().resumeQueue("pz").block(WAIT)).isTrue();
        assertThat(b.admin().resumeQueue("pz").block(WAIT)).isFalse();
        assertThat(admin.pausedQueues().block(WAIT)).isEmpty();
        ids.forEach(id -> assertThat(engines.awaitSettled(a, id, WAIT).status()).isEqualTo(InstanceStatus.DONE));
        assertThat(ran.get()).isEqualTo(10);
        assertThatThrownBy(() -> admin.pauseQueue("no such queue").block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
    }

    /** A failing-then-healed job in queue bk-run, and an engine running it and the bulk queue. */
    private JobDefinition<String, String> healing(AtomicBoolean broken) {
        return JobDefinition.of("bk-job", String.class, (String s) -> broken.get()
                ? Mono.<String>error(new IllegalStateException("down")) : Mono.just(s)).queue("bk-run").maxAttempts(1);
    }

    private EngineOptions.Builder bulkWorker(String name, Duration drain) {
        return worker(name, "bk-run").queue(QueueOptions.builder(DurableAdmin.BULK_QUEUE).concurrency(1)
                .pollInterval(Duration.ofMillis(100)).maxPollInterval(Duration.ofMillis(300)).drainTimeout(drain)
                .build());
    }

    private List<Long> failedJobs(DurableEngine engine, int count) {
        List<Long> ids = IntStream.range(0, count).mapToObj(i -> engine.insert(JobRequest.of("bk-job", "j" + i))
                .block(WAIT)).toList();
        ids.forEach(id -> assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.FAILED));
        return ids;
    }

    @Test
    void aBulkRetryRunsAsADurableJobReachesAllOfItAndTheRowsComplete() {
        AtomicBoolean broken = new AtomicBoolean(true);
        DurableEngine engine = engines.start(bulkWorker("bk", Duration.ofSeconds(5)), healing(broken));
        DurableAdmin admin = engine.admin();
        List<Long> ids = failedJobs(engine, 30);
        broken.set(false);
        InstanceFilter failed = InstanceFilter.builder().queue("bk-run").status(InstanceStatus.FAILED).build();

        long job = admin.startBulk(BulkRequest.retry(failed).batchSize(7)).block(WAIT);
        BulkProgress progress = Eventually.until("bulk retry finished", WAIT, () -> admin.bulkProgress(job).block(WAIT),
                BulkProgress::finished);
        assertThat(progress.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(progress.fraction()).isEqualTo(1.0);
        assertThat(progress.total()).isEqualTo(30);
        assertThat(progress.done()).isEqualTo(30);
        assertThat(progress.affected()).isEqualTo(30);
        ids.forEach(id -> assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE));

        // Reprioritise, cancel and delete by filter, and the guards.
        long parked = engine.insert(JobRequest.of("bk-job", "p").queue("bk-idle")).block(WAIT);
        long prio = admin.startBulk(BulkRequest.setPriority(InstanceFilter.builder().queue("bk-idle").build(), 7))
                .block(WAIT);
        Eventually.until("priority set", WAIT, () -> admin.bulkProgress(prio).block(WAIT).finished());
        assertThat(engine.get(parked).block(WAIT).priority()).isEqualTo(7);
        long cancel = admin.startBulk(BulkRequest.cancel(InstanceFilter.builder().queue("bk-idle").build())).block(WAIT);
        Eventually.until("cancelled", WAIT, () -> admin.bulkProgress(cancel).block(WAIT).finished());
        assertThat(engine.get(parked).block(WAIT).status()).isEqualTo(InstanceStatus.CANCELLED);
        long delete = admin.startBulk(BulkRequest.delete(InstanceFilter.builder().queue("bk-idle").build()))
                .block(WAIT);
        assertThat(Eventually.until("deleted", WAIT, () -> admin.bulkProgress(delete).block(WAIT),
                BulkProgress::finished).affected()).isEqualTo(1);
        assertThat(engine.get(parked).block(WAIT)).isNull();
        assertThatThrownBy(() -> admin.startBulk(BulkRequest.retry(InstanceFilter.builder()
                .status(InstanceStatus.RUNNABLE).build())).block(WAIT)).isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> admin.startBulk(BulkRequest.setPriority(InstanceFilter.all(), 1 << 20)).block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> admin.bulkProgress(ids.get(0)).block(WAIT)).isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> BulkRequest.retry(failed).batchSize(0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aBulkJobWhoseEngineDiesMidWayResumesFromItsLastChunkOnAnother() throws Exception {
        AtomicBoolean broken = new AtomicBoolean(true);
        DurableEngine first = engines.start(bulkWorker("bk-first", Duration.ZERO).runMaintenance(false),
                healing(broken));
        List<Long> ids = failedJobs(first, 30);
        broken.set(false);
        InstanceFilter failed = InstanceFilter.builder().queue("bk-run").status(InstanceStatus.FAILED).build();
        // The last chunk (ids 29 and 30 of chunks 7, 7, 7, 7, 2) blocks on a row lock the test holds.
        io.r2dbc.spi.Connection lock = Mono.from(io.r2dbc.spi.ConnectionFactories.get(db.url()).create()).block(WAIT);
        try {
            Mono.from(lock.beginTransaction()).block(WAIT);
            reactor.core.publisher.Flux.from(lock.createStatement("SELECT id FROM \"" + db.schema()
                            + "\".durable_history WHERE id = $1 FOR UPDATE").bind("$1", ids.get(29)).execute())
                    .flatMap(result -> result.map((row, meta) -> 1)).blockLast(WAIT);

            long job = first.admin().startBulk(BulkRequest.retry(failed).batchSize(7)).block(WAIT);
            Eventually.until("four chunks done", WAIT, () -> first.admin().bulkProgress(job).block(WAIT).done() == 28);
            // The engine dies with the job claimed mid-chunk (no drain): its lease is left to expire.
            first.closeLater().block(WAIT);
            Mono.from(lock.rollbackTransaction()).block(WAIT);

            DurableEngine second = engines.start(bulkWorker("bk-second", Duration.ofSeconds(5)), healing(broken));
            BulkProgress progress = Eventually.until("bulk resumed and finished", WAIT,
                    () -> second.admin().bulkProgress(job).block(WAIT), BulkProgress::finished);
            assertThat(progress.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(progress.fraction()).isEqualTo(1.0);
            assertThat(progress.total()).isEqualTo(30);
            assertThat(progress.done()).isGreaterThanOrEqualTo(28);
            ids.forEach(id -> assertThat(engines.awaitSettled(second, id, WAIT).status())
                    .isEqualTo(InstanceStatus.DONE));
            // The lost claim is in the job's attempt history.
            assertThat(second.admin().detail(job).block(WAIT).attempts()).extracting(Attempt::outcome)
                    .contains(Attempt.Outcome.LEASE_LOST);
        } finally {
            Mono.from(lock.close()).block(WAIT);
        }
    }
}
