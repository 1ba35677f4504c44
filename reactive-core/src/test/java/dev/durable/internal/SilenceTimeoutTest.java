package dev.durable.internal;

import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;
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
}
