package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/** What becomes of each thing a handler can do: succeed, fail, fail for good, hang, block, throw. */
@ExtendWith(PostgresExtension.class)
class ExecutorIT {

    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final Backoff FAST = Backoff.fixed(Duration.ofMillis(10));

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private DurableEngine engine(String queue, JobDefinition<?, ?>... definitions) {
        return engines.start(engines.options("exec-" + queue)
                .queue(QueueOptions.builder(queue).concurrency(4).pollInterval(Duration.ofMillis(50)).build()),
                definitions);
    }

    @Test
    void anErrorIsRetriedWithBackoffThenFailsKeepingTheLastError() {
        AtomicInteger calls = new AtomicInteger();
        DurableEngine engine = engine("retry", JobDefinition.of("flaky", String.class,
                        (String s) -> Mono.<String>error(new IllegalStateException("boom " + calls.incrementAndGet())))
                .queue("retry").maxAttempts(3).backoff(FAST));
        long id = engine.insert(JobRequest.of("flaky", "x")).block();
        Instance failed = engines.awaitStatus(engine, id, InstanceStatus.FAILED, WAIT);
        assertThat(failed.attempt()).isEqualTo(3);
        assertThat(calls.get()).isEqualTo(3);
        assertThat(failed.lastError()).isEqualTo("java.lang.IllegalStateException: boom 3");
        assertThat(failed.claimedBy()).isNull();
    }

    @Test
    void aRetryThatSucceedsEndsDone() {
        AtomicInteger calls = new AtomicInteger();
        DurableEngine engine = engine("recover", JobDefinition.of("second-time", String.class,
                        (String s) -> calls.incrementAndGet() < 2 ? Mono.error(new RuntimeException("not yet"))
                                : Mono.just("ok"))
                .queue("recover").backoff(FAST));
        long id = engine.insert(JobRequest.of("second-time", "x")).block();
        Instance done = engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(done.attempt()).isEqualTo(2);
        assertThat(done.resultJson()).isEqualTo("\"ok\"");
    }

    @Test
    void theDefaultBackoffDelaysTheNextAttemptByTheDatabaseClock() {
        DurableEngine engine = engine("backoff", JobDefinition.of("fails-once", String.class,
                (String s) -> Mono.error(new RuntimeException("later"))).queue("backoff"));
        long id = engine.insert(JobRequest.of("fails-once", "x")).block();
        Instance waiting = Eventually.until("retry scheduled", WAIT, () -> engine.get(id).block(),
                i -> i.status() == InstanceStatus.RUNNABLE && i.attempt() == 1);
        Double delay = Sql.query(db, "SELECT extract(epoch FROM eligible_at - updated_at)::float8"
                + " FROM {schema}.durable_instances WHERE id = $1", row -> row.get(0, Double.class), id).get(0);
        assertThat(delay).isBetween(0.99, 1.01);
        assertThat(waiting.lastError()).contains("later");
    }

    @Test
    void aPermanentFailureAndAnErrorOnTheLastAttemptFailAtOnce() {
        DurableEngine engine = engine("permanent",
                JobDefinition.of("hopeless", String.class,
                        (String s) -> Mono.<String>error(new PermanentFailureException("card declined")))
                        .queue("permanent").backoff(FAST),
                JobDefinition.of("thrower", String.class, (JobHandler<String, String>) (s, ctx) -> {
                    throw new IllegalArgumentException("thrown, not signalled");
                }).queue("permanent").maxAttempts(1));
        long hopeless = engine.insert(JobRequest.of("hopeless", "x")).block();
        long thrower = engine.insert(JobRequest.of("thrower", "x")).block();
        Instance failed = engines.awaitStatus(engine, hopeless, InstanceStatus.FAILED, WAIT);
        assertThat(failed.attempt()).isEqualTo(1);
        assertThat(failed.lastError()).contains("card declined");
        assertThat(engines.awaitStatus(engine, thrower, InstanceStatus.FAILED, WAIT).lastError())
                .isEqualTo("java.lang.IllegalArgumentException: thrown, not signalled");
    }

    @Test
    void aHandlerThatNeverAnswersIsCutByItsTimeout() {
        DurableEngine engine = engine("timeout", JobDefinition.of("hangs", String.class, (String s) -> Mono.<String>never())
                .queue("timeout").timeout(Duration.ofMillis(300)).maxAttempts(2).backoff(FAST));
        long id = engine.insert(JobRequest.of("hangs", "x")).block();
        Instance failed = engines.awaitStatus(engine, id, InstanceStatus.FAILED, WAIT);
        assertThat(failed.attempt()).isEqualTo(2);
        assertThat(failed.lastError()).isEqualTo("timed out after PT0.3S");
    }

    @Test
    void blockingHandlersDoNotStallTheQueue() {
        CountDownLatch release = new CountDownLatch(1);
        JobDefinition<String, String> sleeper = JobDefinition.of("sleeper", String.class, (String s) -> Mono.fromCallable(() -> {
            // A handler that blocks (until the quick jobs are done): it runs on bounded elastic, not on an event loop.
            release.await(2, TimeUnit.MINUTES);
            return s;
        })).queue("blocking");
        JobDefinition<String, String> quick = JobDefinition.of("quick", String.class, (String s) -> Mono.just(s))
                .queue("blocking");
        DurableEngine engine = engine("blocking", sleeper, quick);
        long slow = engine.insert(JobRequest.of("sleeper", "z").priority(-1)).block();
        Eventually.until("sleeper running", WAIT, () -> engine.get(slow).block().status() == InstanceStatus.EXECUTING);
        for (int i = 0; i < 20; i++) {
            engine.insert(JobRequest.of("quick", "q" + i)).block();
        }
        Eventually.until("quick jobs done while the sleeper sleeps", WAIT,
                () -> Sql.count(db, "type = 'quick' AND status = 'done'") == 20);
        assertThat(engine.get(slow).block().status()).isEqualTo(InstanceStatus.EXECUTING);
        release.countDown();
        engines.awaitStatus(engine, slow, InstanceStatus.DONE, WAIT);
    }

    record Order(String sku, int quantity) {
    }

    @Test
    void unknownTypesWaitForAnEngineThatKnowsThemAndMalformedArgumentsFailWithTheReason() {
        DurableEngine producer = engines.start(engines.options("loose").rejectUnknownTypes(false));
        DurableEngine worker = engine("strict", JobDefinition.of("order", Order.class, (Order o) -> Mono.just(o.quantity()))
                .queue("strict"));
        long ghost = producer.insert(JobRequest.of("ghost", "boo").queue("strict")).block();
        long malformed = producer.insert(JobRequest.of("order", "not an order").queue("strict")).block();
        assertThat(engines.awaitStatus(worker, malformed, InstanceStatus.FAILED, WAIT).lastError())
                .startsWith("malformed arguments for " + Order.class.getName());
        assertThat(engines.awaitStatus(worker, malformed, InstanceStatus.FAILED, WAIT).attempt()).isEqualTo(1);

        // A type this engine does not know is never picked, never failed: it waits, visibly.
        Eventually.sleep(500); // several polls of the worker
        Instance waiting = worker.get(ghost).block();
        assertThat(waiting.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(waiting.attempt()).isZero();
        // (Other tests of this class leave rows in queues nobody serves now: look at this queue only.)
        List<UnservedWork> unserved = worker.unservedWork().filter(work -> work.queue().equals("strict"))
                .collectList().block();
        assertThat(unserved).singleElement().satisfies(work -> {
            assertThat(work.queue()).isEqualTo("strict");
            assertThat(work.type()).isEqualTo("ghost");
            assertThat(work.reason()).isEqualTo(UnservedWork.Reason.NO_ENGINE_KNOWS_TYPE);
            assertThat(work.instances()).isEqualTo(1);
        });
        // An engine that knows the type comes along and runs it.
        engines.start(engines.options("knower")
                        .queue(QueueOptions.builder("strict").pollInterval(Duration.ofMillis(50)).build()),
                JobDefinition.of("ghost", String.class, (String s) -> Mono.just(s + "!")).queue("strict"));
        assertThat(engines.awaitStatus(worker, ghost, InstanceStatus.DONE, WAIT).resultJson()).isEqualTo("\"boo!\"");
        assertThat(worker.unservedWork().filter(work -> work.queue().equals("strict")).collectList().block())
                .isEmpty();

        // A type removed for good is failed on purpose.
        long forgotten = producer.insert(JobRequest.of("removed", "x").queue("strict")).block();
        assertThat(worker.failUnrunnable("removed", "type removed in release 42").block()).isEqualTo(1);
        Instance failed = worker.get(forgotten).block();
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.lastError()).isEqualTo("type removed in release 42");
    }

    @Test
    void aLateCommitAfterTheLeaseWasLostIsDroppedAsStale() {
        SchedulerIT.GatedJob job = new SchedulerIT.GatedJob();
        DurableEngine engine = engine("stale", job.definition("gated", "stale"));
        long id = engine.insert(JobRequest.of("gated", "x")).block();
        Eventually.until("running", WAIT, () -> job.started.get() == 1);
        // Another owner took the row over (as after an expired lease and a new pick).
        Sql.update(db, "UPDATE {schema}.durable_instances SET claimed_by = 'thief', lease_expires_at = now()"
                + " + interval '1 second' WHERE id = $1", id);
        job.open();
        Eventually.until("stale outcome reported", WAIT,
                () -> engine.queueStats().get(0).stale() == 1);
        Instance stolen = engine.get(id).block();
        assertThat(stolen.status()).isEqualTo(InstanceStatus.EXECUTING);
        assertThat(stolen.claimedBy()).isEqualTo("thief");
        // The thief never beats; the reaper gives the row back and it runs again.
        Instance done = engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(done.attempt()).isEqualTo(2);
    }
}
