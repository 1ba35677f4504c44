package dev.durable.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.DurableTimeoutException;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class DurableTestingIT {

    @Test
    void drainRunsEverythingDueAndTheAssertionsSayWhatTheyFound(TestDatabase db) {
        JobDefinition<Integer, Integer> square = JobDefinition.of("square", Integer.class, (Integer n) -> Mono.just(n * n))
                .queue("test");
        JobDefinition<String, String> broken = JobDefinition.of("broken", String.class,
                (String s) -> Mono.<String>error(new IllegalStateException("no " + s)))
                .queue("test").maxAttempts(2).backoff(Backoff.fixed(Duration.ofMillis(10)));
        WorkflowDefinition<Integer> sum = WorkflowDefinition.builder("sum", Integer.class).queue("test")
                .step("fan", ctx -> Mono.just(Outcome.spawnChildren(
                        List.of(JobRequest.of("square", 2), JobRequest.of("square", 3)), "join", ctx.state())))
                .step("join", ctx -> Mono.just(Outcome.done(ctx.children().stream()
                        .mapToInt(child -> ctx.result(child, Integer.class)).sum() + ctx.state())))
                .build();
        JobDefinition<String, String> hangs = JobDefinition.of("hangs", String.class, (String s) -> Mono.<String>never())
                .queue("test").maxAttempts(1);
        DurableEngine engine = DurableEngine.builder(db.engineOptions().name("testing")
                        .queue(QueueOptions.builder("test").pollInterval(Duration.ofMillis(100))
                                .drainTimeout(Duration.ofMillis(100)).build()).build())
                .register(square).register(broken).register(sum).register(hangs)
                .build();
        engine.start().block();
        try {
            long squared = engine.insert(JobRequest.of("square", 7)).block();
            long failed = engine.insert(JobRequest.of("broken", "luck")).block();
            long summed = engine.insert(JobRequest.of("sum", 100)).block();
            DurableTesting.drain(engine);

            DurableTesting.assertInstance(engine, squared).isDone().hasResult(49);
            DurableTesting.assertInstance(engine, failed).isFailed().hasLastErrorContaining("no luck");
            DurableTesting.assertInstance(engine, summed).isDone().isAtStep("join").hasResult(113);
            assertThatThrownBy(() -> DurableTesting.assertInstance(engine, failed).isDone())
                    .isInstanceOf(AssertionError.class).hasMessageContaining("is FAILED, expected DONE")
                    .hasMessageContaining("no luck");

            engine.insert(JobRequest.of("hangs", "forever")).block();
            assertThatThrownBy(() -> engine.awaitIdle(Duration.ofMillis(500)).block())
                    .isInstanceOf(DurableTimeoutException.class).hasMessageContaining("[test]");
        } finally {
            engine.closeLater().block();
        }
        assertThat(engine.options().queues()).containsKey("test");
    }
}
