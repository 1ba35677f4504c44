package dev.durable.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

class LateRaceTest {

    @Test
    void aSourceThatEndsAtOnceNeverArmsTheTrigger() {
        AtomicInteger armed = new AtomicInteger();
        Mono<String> trigger = Mono.defer(() -> {
            armed.incrementAndGet();
            return Mono.never();
        });
        StepVerifier.create(onNonBlocking(() -> LateRace.until(Mono.just("done"), trigger, () -> "stopped")))
                .expectNext("done")
                .verifyComplete();
        StepVerifier.create(onNonBlocking(() -> LateRace.until(Mono.<String>empty(), trigger, () -> "stopped")))
                .verifyComplete();
        StepVerifier.create(onNonBlocking(() -> LateRace.until(Mono.<String>error(new IllegalStateException("boom")),
                trigger, () -> "stopped"))).verifyErrorMessage("boom");
        assertThat(armed).hasValue(0);
    }

    @Test
    void aSlowSourceIsStoppedAndCancelled() {
        Sinks.Empty<Void> stop = Sinks.empty();
        AtomicBoolean cancelled = new AtomicBoolean();
        Mono<String> slow = Mono.<String>never().doOnCancel(() -> cancelled.set(true));
        StepVerifier.create(LateRace.until(slow, stop.asMono(), () -> "stopped"))
                .then(stop::tryEmitEmpty)
                .expectNext("stopped")
                .verifyComplete();
        assertThat(cancelled).isTrue();
    }

    @Test
    void aSourceThatEndsFirstDisposesTheTrigger() {
        Sinks.One<String> value = Sinks.one();
        AtomicBoolean triggerCancelled = new AtomicBoolean();
        Mono<Void> stop = Mono.<Void>never().doOnCancel(() -> triggerCancelled.set(true));
        StepVerifier.create(LateRace.until(value.asMono(), stop, () -> "stopped"))
                .then(() -> value.tryEmitValue("done"))
                .expectNext("done")
                .verifyComplete();
        assertThat(triggerCancelled).isTrue();
    }

    @Test
    void aSlowAsyncSourceTimesOut() {
        StepVerifier.withVirtualTime(() -> LateRace.timeout(Mono.delay(Duration.ofMinutes(10)), Duration.ofSeconds(30)))
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(29))
                .thenAwait(Duration.ofSeconds(2))
                .expectError(TimeoutException.class)
                .verify(Duration.ofSeconds(30));
    }

    @Test
    void anAsyncSourceWithinTheTimeoutEndsAsItself() {
        StepVerifier.withVirtualTime(() -> LateRace.timeout(Mono.delay(Duration.ofSeconds(10)), Duration.ofSeconds(30)))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(10))
                .expectNext(0L)
                .expectComplete()
                .verify(Duration.ofSeconds(30));
    }

    @Test
    void aSourceThatEndsAtOnceButTookLongerThanTheTimeoutTimedOut() {
        Mono<String> slowAtOnce = Mono.fromSupplier(() -> {
            try {
                Thread.sleep(30);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
            return "late";
        });
        StepVerifier.create(onNonBlocking(() -> LateRace.timeout(slowAtOnce, Duration.ofMillis(1))))
                .verifyError(TimeoutException.class);
    }

    @Test
    void aStopFiresWhileTheSourceBlocksInsideSubscribe() {
        CountDownLatch release = new CountDownLatch(1);
        Sinks.Empty<Void> stop = Sinks.empty();
        try {
            StepVerifier.create(LateRace.until(blockingUntil(release), stop.asMono(), () -> "stopped")
                            .subscribeOn(Schedulers.boundedElastic()))
                    .expectSubscription()
                    .then(stop::tryEmitEmpty)
                    .expectNext("stopped")
                    .expectComplete()
                    .verify(Duration.ofSeconds(30));
        } finally {
            release.countDown();
        }
    }

    /** Subscribes the race on a non-blocking thread, where it arms its trigger only when needed. */
    private static <T> Mono<T> onNonBlocking(java.util.function.Supplier<Mono<T>> race) {
        return Mono.defer(race).subscribeOn(Schedulers.parallel());
    }

    /** A handler that blocks its thread inside subscribe until released (at most 30 s). */
    private static Mono<String> blockingUntil(CountDownLatch release) {
        return Mono.fromCallable(() -> release.await(30, TimeUnit.SECONDS) ? "released" : "gave up");
    }

    @Test
    void cancellingTheRaceCancelsSourceAndTrigger() {
        AtomicBoolean sourceCancelled = new AtomicBoolean();
        AtomicBoolean triggerCancelled = new AtomicBoolean();
        Mono<String> race = LateRace.until(Mono.<String>never().doOnCancel(() -> sourceCancelled.set(true)),
                Mono.never().doOnCancel(() -> triggerCancelled.set(true)), () -> "stopped");
        StepVerifier.create(race).expectSubscription().expectNoEvent(Duration.ofMillis(50)).thenCancel().verify();
        assertThat(sourceCancelled).isTrue();
        assertThat(triggerCancelled).isTrue();
    }
}
