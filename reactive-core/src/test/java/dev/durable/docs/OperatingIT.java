package dev.durable.docs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.admin.Attempt;
import dev.durable.admin.BulkAction;
import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.BulkResult;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.Page;
import dev.durable.admin.PageRequest;
import dev.durable.admin.QueuePause;
import dev.durable.admin.StatusCount;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/** The admin API of docs/operations.md, run as written (DocsSnippetsTest checks the guide shows this region). */
@ExtendWith(PostgresExtension.class)
class OperatingIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    record Charge(String customer, long cents) {
    }

    @Test
    void aDeadLetterViewAndItsRedrive(TestDatabase db) {
        AtomicBoolean bankDown = new AtomicBoolean(true);
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("payments").pollInterval(Duration.ofMillis(100)).build())
                        .queue(QueueOptions.builder(DurableAdmin.BULK_QUEUE).pollInterval(Duration.ofMillis(100)).build())
                        .build())
                .register(JobDefinition.of("charge", Charge.class, (Charge c) -> bankDown.get()
                                ? Mono.<String>error(new IllegalStateException("bank timeout for " + c.customer()))
                                : Mono.just("charged " + c.customer()))
                        .queue("payments").maxAttempts(1))
                .build();
        try {
            engine.start().block(WAIT);
            List<Long> ids = engine.insertAll(IntStream.range(0, 3)
                    .mapToObj(i -> JobRequest.of("charge", new Charge("c" + i, 100))).toList()).block(WAIT);
            ids.forEach(id -> engine.awaitSettled(id, WAIT).block());
            bankDown.set(false);

            // tag::operating[]
            DurableAdmin admin = engine.admin();

            // The dead letters of a queue: failed, newest first, 50 a page; page on with the cursor.
            InstanceFilter deadLetters = InstanceFilter.builder()
                    .queue("payments")
                    .status(InstanceStatus.FAILED)
                    .errorContains("timeout")                      // case-insensitive text of the last error
                    .insertedBetween(Instant.now().minus(Duration.ofDays(1)), null)
                    .build();
            Page<Instance> page = admin.list(deadLetters, PageRequest.newestFirst(50)).block();
            if (page.hasNext()) {
                Page<Instance> older = admin.list(deadLetters, PageRequest.newestFirst(50).after(page.next())).block();
            }

            // Search by args (JSON containment), by correlation key or its prefix, by type, by time range.
            Page<Instance> ofCustomer = admin.list(InstanceFilter.builder()
                    .stateContains("{\"customer\": \"c1\"}").build(), PageRequest.newestFirst(20)).block();

            // One instance: its children, inbox (or consumed signals) and last error.
            InstanceDetail detail = admin.detail(ofCustomer.items().get(0).id()).block();
            String why = detail.lastError();                       // "java.lang.IllegalStateException: bank timeout for c1"
            List<Attempt> attempts = detail.attempts();            // each try: worker, start, end, outcome, error

            // Counts by queue and status: live rows counted, settled ones estimated on a big history.
            List<StatusCount> counts = admin.counts().block();

            // Retry in place: same id, args and state, from the step that failed, with a fresh attempt budget.
            Instance retried = admin.retry(detail.instance().id()).block();

            // Or redrive every dead letter the filter matches, in batches of 500.
            BulkResult redriven = admin.retryAll(deadLetters).block();

            // Over millions of rows, as a durable job: chunked, resumable after a crash, with its progress.
            // Some engine must run the queue DurableAdmin.BULK_QUEUE.
            long bulk = admin.startBulk(BulkRequest.retry(deadLetters).batchSize(1_000)).block();
            BulkProgress progress = admin.bulkProgress(bulk).block();   // total, done, fraction() from 0 to 1

            // Stop a queue on every engine (running work finishes), and start it again.
            admin.pauseQueue("payments").block();
            List<QueuePause> paused = admin.pausedQueues().block();
            admin.resumeQueue("payments").block();
            // end::operating[]

            assertThat(page.items()).hasSize(3);
            assertThat(ofCustomer.items()).extracting(Instance::id).containsExactly(ids.get(1));
            assertThat(why).contains("bank timeout for c1");
            assertThat(attempts).extracting(Attempt::outcome).containsExactly(Attempt.Outcome.FAILED);
            assertThat(progress.action()).isEqualTo(BulkAction.RETRY);
            assertThat(paused).extracting(QueuePause::queue).containsExactly("payments");
            assertThat(counts).contains(new StatusCount("payments", InstanceStatus.FAILED, 3, false));
            assertThat(retried.id()).isEqualTo(ids.get(1));
            assertThat(redriven.affected()).isEqualTo(2);
            ids.forEach(id -> assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.DONE));
            assertThat(engine.awaitSettled(bulk, WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
        } finally {
            engine.closeLater().block(WAIT);
        }
    }
}
