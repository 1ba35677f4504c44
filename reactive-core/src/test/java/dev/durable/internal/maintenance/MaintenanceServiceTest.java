package dev.durable.internal.maintenance;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableTimeoutException;
import dev.durable.Maintenance.TaskOptions;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The pass loop, the budget, the timeout and the lane of a maintenance service, on virtual time. */
class MaintenanceServiceTest {

    private final VirtualTimeScheduler time = VirtualTimeScheduler.create();
    private final Lane lane = new Lane("test");
    private final SimpleMeterRegistry meters = new SimpleMeterRegistry();

    @AfterEach
    void tearDown() {
        lane.close();
        time.dispose();
    }

    /** A service whose batches are given by the test. */
    private final class Scripted extends MaintenanceService {
        final AtomicInteger batches = new AtomicInteger();
        final Supplier<Mono<Long>> next;

        Scripted(String task, TaskOptions options, Supplier<Mono<Long>> next) {
            super(task, options, lane, time, meters, "test." + task);
            this.next = next;
        }

        @Override
        protected Mono<Long> batch(int limit, Duration timeout) {
            batches.incrementAndGet();
            return next.get();
        }
    }

    private static Supplier<Mono<Long>> counts(Long... counts) {
        Queue<Long> left = new ArrayDeque<>(List.of(counts));
        return () -> Mono.fromSupplier(() -> left.isEmpty() ? 0L : left.poll());
    }

    @Test
    void aPassTakesBatchesUntilOneComesBackShort() {
        Scripted gc = new Scripted("gc", TaskOptions.every(Duration.ofSeconds(5)).withBatchSize(100),
                counts(100L, 100L, 30L, 100L));
        StepVerifier.create(gc.pass()).expectNext(230L).verifyComplete();
        assertThat(gc.batches.get()).isEqualTo(3);
        assertThat(gc.handled()).isEqualTo(230);
        assertThat(meters.counter("test.gc").count()).isEqualTo(230.0);
    }

    @Test
    void aPassStopsTakingBatchesOnceItsBudgetIsSpent() {
        // Every batch full and a second long: a budget of 2.5 s allows the batches begun before it ran out.
        Scripted gc = new Scripted("gc", TaskOptions.every(Duration.ofSeconds(5)).withBatchSize(10)
                .withBudget(Duration.ofMillis(2500)), () -> Mono.delay(Duration.ofSeconds(1), time).thenReturn(10L));
        StepVerifier.create(gc.pass())
                .then(() -> time.advanceTimeBy(Duration.ofSeconds(10)))
                .expectNext(30L)
                .verifyComplete();
        assertThat(gc.batches.get()).isEqualTo(3);
    }

    @Test
    void aStalledBatchTimesOutAndTheNextTickTriesAgainWhileAnotherTaskKeepsItsTicks() {
        AtomicInteger calls = new AtomicInteger();
        Scripted stuck = new Scripted("stuck", TaskOptions.every(Duration.ofSeconds(1))
                .withTimeout(Duration.ofMillis(300)), () -> calls.incrementAndGet() <= 2 ? Mono.never() : Mono.just(1L));
        Scripted reaper = new Scripted("reaper", TaskOptions.every(Duration.ofSeconds(1)), counts(1L, 1L, 1L, 1L));
        StepVerifier.create(stuck.pass())
                .then(() -> time.advanceTimeBy(Duration.ofSeconds(1)))
                .verifyError(DurableTimeoutException.class);
        assertThat(stuck.failures()).isEqualTo(1);

        stuck.start();
        reaper.start();
        try {
            time.advanceTimeBy(Duration.ofSeconds(4));
            // The stuck task's second batch times out (its lane held 300 ms), its later ones run; the
            // reaper, waiting on the lane meanwhile, never lost a tick.
            assertThat(stuck.failures()).isEqualTo(2);
            assertThat(stuck.handled()).isEqualTo(3);
            assertThat(reaper.handled()).isEqualTo(4);
            assertThat(meters.counter("durable.maintenance.failures", "task", "stuck").count()).isEqualTo(2.0);
        } finally {
            stuck.stop();
            reaper.stop();
        }
    }

    @Test
    void taskOptionsCheckTheirArguments() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> TaskOptions.every(Duration.ZERO))
                .hasMessage("interval must be positive, was PT0S");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> TaskOptions.every(Duration.ofSeconds(1)).withBatchSize(0))
                .hasMessage("batchSize must be at least 1, was 0");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> TaskOptions.every(Duration.ofSeconds(1))
                .withBudget(Duration.ofMillis(-1))).hasMessage("budget must be positive, was PT-0.001S");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> TaskOptions.every(Duration.ofSeconds(1)).withTimeout(null))
                .hasMessage("timeout must not be null");
        assertThat(dev.durable.EngineOptions.builder().url("r2dbc:postgresql://h/db").reaperInterval(Duration.ofSeconds(2))
                .build().reaper()).isEqualTo(TaskOptions.every(Duration.ofSeconds(2)));
    }

    @Test
    void aSwitchedOffTaskHasNoTicksButRunsAPassByHand() {
        Scripted off = new Scripted("off", TaskOptions.every(Duration.ofSeconds(1)).disabled(), counts(5L));
        off.start();
        time.advanceTimeBy(Duration.ofSeconds(10));
        assertThat(off.batches.get()).isZero();
        StepVerifier.create(off.pass()).expectNext(5L).verifyComplete();
    }
}
