package dev.durable.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.RecurringJob;
import dev.durable.WorkflowDefinition;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * Issue 23: time moved by the test. An hour's await and a backoff of minutes run without waiting
 * for them (the test asserts outcomes; its waits are for the engine's runs only).
 */
@ExtendWith(PostgresExtension.class)
class TestClockIT {

    private TestDatabase db;
    private TestClock clock;
    private DurableEngine engine;
    private final AtomicInteger attempts = new AtomicInteger();

    @BeforeEach
    void start(TestDatabase database) {
        db = database;
        clock = TestClock.on(db);
        attempts.set(0);
        WorkflowDefinition<String> approval = WorkflowDefinition.builder("approval", String.class).queue("test")
                .step("ask", ctx -> Mono.just(Outcome.await(Set.of("approved"), "decide", ctx.state(),
                        Duration.ofHours(1))))
                .step("decide", ctx -> Mono.just(Outcome.done(ctx.awaitTimedOut() ? "expired" : "approved")))
                .build();
        // Fails three times, then succeeds: backoffs of 1, 2 and 4 minutes.
        JobDefinition<String, String> flaky = JobDefinition.of("flaky", String.class, (String s) ->
                        attempts.incrementAndGet() <= 3 ? Mono.<String>error(new IllegalStateException("not yet"))
                                : Mono.just("ok after " + attempts.get()))
                .queue("test").maxAttempts(10).backoff(Backoff.exponential(Duration.ofMinutes(1), Duration.ofHours(1)));
        JobDefinition<String, String> later = JobDefinition.of("later", String.class, (String s) -> Mono.just(s))
                .queue("test");
        engine = DurableEngine.builder(clock.engineOptions().name("clocked")
                        .queue(QueueOptions.builder("test").pollInterval(Duration.ofMillis(50)).build()).build())
                .register(approval).register(flaky).register(later).build();
        engine.start().block();
    }

    @AfterEach
    void stop() {
        engine.closeLater().block(Duration.ofSeconds(60));
    }

    @Test
    void aWorkflowAwaitingASignalForAnHourTimesOutWhenTheClockPassesIt() {
        long id = engine.insert(JobRequest.of("approval", "invoice 7")).block();
        DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
        DurableTesting.assertInstance(engine, id).isAwaitingSignal();

        clock.advance(Duration.ofMinutes(59));
        DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());
        DurableTesting.assertInstance(engine, id).isAwaitingSignal();

        clock.advance(Duration.ofMinutes(2));
        DurableTesting.drain(engine, DrainOptions.defaults().withRecursion());

        DurableTesting.assertInstance(engine, id).isDone().isAtStep("decide").hasResult("expired");
    }

    @Test
    void aJobRetriesWithExponentialBackoffToSuccessThroughTheScheduledTimes() {
        Instant start = clock.now();
        // Scheduled, so that every run happens inside the drain and its summary counts them all.
        long id = engine.insert(JobRequest.of("flaky", "x").runIn(Duration.ofMinutes(1))).block();

        long began = System.nanoTime();
        DrainSummary ran = DurableTesting.drain(engine, DrainOptions.defaults().withScheduled());
        // Reported, not asserted: the wall time of four runs through 7 minutes of backoff.
        System.out.println("backoff drain took " + Duration.ofNanos(System.nanoTime() - began).toMillis() + " ms");

        DurableTesting.assertInstance(engine, id).isDone().hasResult("ok after 4");
        assertThat(ran.retried()).isEqualTo(3);
        assertThat(ran.done()).isEqualTo(1);
        assertThat(ran.failed()).isZero();
        assertThat(ran.advancedTo()).hasSize(4);
        // The clock went through the backoffs (1 + 2 + 4 minutes at least), the test did not wait for them.
        assertThat(Duration.between(start, clock.now())).isGreaterThanOrEqualTo(Duration.ofMinutes(8));
    }

    @Test
    void withoutScheduledTheDrainStopsAtTheFirstBackoffAndScheduledRowsWaitForTheClock() {
        long flaky = engine.insert(JobRequest.of("flaky", "x").runIn(Duration.ofMinutes(1))).block();
        long scheduled = engine.insert(JobRequest.of("later", "tomorrow").runIn(Duration.ofDays(1))).block();

        DrainSummary nothingDue = DurableTesting.drain(engine, DrainOptions.defaults());
        assertThat(nothingDue.settled() + nothingDue.retried()).isZero();
        assertThat(attempts.get()).isZero();

        clock.advance(Duration.ofMinutes(1));
        DurableTesting.drain(engine, DrainOptions.defaults());
        // The first attempt ran and failed; its retry waits for its backoff, which a plain drain does not pass.
        assertThat(attempts.get()).isEqualTo(1);
        DurableTesting.assertInstance(engine, flaky).hasStatus(InstanceStatus.RUNNABLE).hasLastErrorContaining("not yet");
        DurableTesting.assertInstance(engine, scheduled).hasStatus(InstanceStatus.RUNNABLE);

        DrainSummary rest = DurableTesting.drain(engine, DrainOptions.defaults().withScheduled());
        DurableTesting.assertInstance(engine, flaky).isDone().hasResult("ok after 4");
        DurableTesting.assertInstance(engine, scheduled).isDone().hasResult("tomorrow");
        assertThat(rest.done()).isEqualTo(2);
        assertThat(rest.retried()).isEqualTo(2);
    }

    @Test
    void aRecurringJobRunsAtItsTimeOnTheTestClockAndItsNextRunFollowsTheClock() {
        JobDefinition<String, String> report = JobDefinition.of("report", String.class, (String s) -> Mono.just(s))
                .queue("reports");
        DurableEngine cron = DurableEngine.builder(clock.engineOptions().name("cron")
                        .recurringInterval(Duration.ofMillis(50))
                        .queue(QueueOptions.builder("reports").pollInterval(Duration.ofMillis(50)).build()).build())
                .register(report)
                .schedule(RecurringJob.of("nightly", "0 3 * * *", JobRequest.of("report", "all")))
                .build();
        cron.start().block();
        try {
            Instance first = waitForReports(cron, 1).get(0);
            assertThat(first.eligibleAt().atZone(ZoneOffset.UTC).getHour()).isEqualTo(3);

            // A day at most: the run at 3 o'clock, not the next night's the runner inserts after it.
            DrainSummary ran = DurableTesting.drain(cron, DrainOptions.defaults().withScheduled(Duration.ofDays(1))
                    .withRecursion());

            assertThat(ran.done()).isEqualTo(1);
            assertThat(ran.advancedTo()).containsExactly(first.eligibleAt());
            DurableTesting.assertInstance(cron, first.id()).isDone().hasResult("all");
            Instance next = waitForReports(cron, 2).get(1);
            assertThat(next.eligibleAt()).isEqualTo(first.eligibleAt().plus(Duration.ofDays(1)));
            assertThat(next.status()).isEqualTo(InstanceStatus.RUNNABLE);
        } finally {
            cron.closeLater().block(Duration.ofSeconds(60));
        }
    }

    /** The runner inserts on its own ticks: wait (bounded) for the count of report runs. */
    private static List<Instance> waitForReports(DurableEngine engine, int count) {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            List<Instance> reports = engine.list("reports", null, 0, 100).collectList().block();
            if (reports.size() >= count || System.nanoTime() > deadline) {
                assertThat(reports).hasSizeGreaterThanOrEqualTo(count);
                return reports;
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    @Test
    void withScheduledNeedsAnEngineOnATestClock() {
        DurableEngine plain = DurableEngine.builder(db.engineOptions().name("plain").build()).build();
        assertThatThrownBy(() -> DurableTesting.drain(plain, DrainOptions.defaults().withScheduled()))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("TestClock");
        assertThatThrownBy(() -> clock.advance(Duration.ofSeconds(-1))).isInstanceOf(IllegalArgumentException.class);
        assertThat(List.of(TestClock.of(engine).orElseThrow())).containsExactly(clock);
    }
}
