package dev.durable.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

class SilenceTimeoutTest {

    @Test
    void aSilentCallTimesOut() {
        StepVerifier.withVirtualTime(() -> new SilenceTimeout<>(Flux.<Long>never(), Duration.ofSeconds(10)))
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(9))
                .thenAwait(Duration.ofSeconds(2))
                .expectError(TimeoutException.class)
                .verify(Duration.ofSeconds(30));
    }

    @Test
    void rowsThatKeepComingKeepTheCallAliveLongPastOneTimeout() {
        StepVerifier.withVirtualTime(() -> new SilenceTimeout<>(Flux.interval(Duration.ofSeconds(6)).take(5),
                        Duration.ofSeconds(10)))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(30))
                .expectNext(0L, 1L, 2L, 3L, 4L)
                .expectComplete()
                .verify(Duration.ofSeconds(30));
    }

    @Test
    void aCallSilentAfterItsLastRowTimesOutATimeoutAfterIt() {
        StepVerifier.withVirtualTime(() -> new SilenceTimeout<>(
                        Flux.interval(Duration.ofSeconds(6)).take(2).concatWith(Flux.never()), Duration.ofSeconds(10)))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(12))
                .expectNext(0L, 1L)
                .expectNoEvent(Duration.ofSeconds(9))
                .thenAwait(Duration.ofSeconds(2))
                .expectError(TimeoutException.class)
                .verify(Duration.ofSeconds(30));
    }

    @Test
    void aQuickCallEndsAsItself() {
        StepVerifier.create(new SilenceTimeout<>(Flux.just(1, 2, 3), Duration.ofSeconds(10)))
                .expectNext(1, 2, 3)
                .verifyComplete();
    }

    @Test
    void aTimeoutAndADownstreamCancelAtOnceCancelTheCallOnce() throws InterruptedException {
        AtomicInteger cancels = new AtomicInteger();
        CountDownLatch secondCancelTried = new CountDownLatch(1);
        // The timer's cancel is held inside the call's cancel while the downstream cancels too: a
        // connection's close, reached twice at once, spun on both threads.
        Flux<Long> call = Flux.<Long>never().doOnCancel(() -> {
            if (cancels.incrementAndGet() == 1) {
                try {
                    secondCancelTried.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        Disposable subscription = new SilenceTimeout<>(call, Duration.ofMillis(50)).subscribe(row -> { }, error -> { });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (cancels.get() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(cancels).as("the timeout's cancel").hasValue(1);

        subscription.dispose();
        secondCancelTried.countDown();

        assertThat(cancels).as("cancels of the call").hasValue(1);
    }
}
