package dev.durable.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.engine.OutcomeTally.Outcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The tally's flushes: counts in queue order, kept across a failed flush, and a stop that loses none. */
class OutcomeTallyTest {

    /** What a store received, per queue: completed, failed, retried, cancelled, reaped summed over flushes. */
    private static final class Received implements OutcomeTally.Store {
        final Map<String, long[]> totals = new TreeMap<>();
        final List<List<String>> flushes = new ArrayList<>();
        final AtomicInteger failuresLeft = new AtomicInteger();

        @Override
        public Mono<Void> add(String[] queues, Long[] completed, Long[] failed, Long[] retried, Long[] cancelled,
                Long[] reaped) {
            return Mono.defer(() -> {
                if (failuresLeft.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                    return Mono.error(new IllegalStateException("the database said no"));
                }
                flushes.add(List.of(queues));
                for (int i = 0; i < queues.length; i++) {
                    long[] sum = totals.computeIfAbsent(queues[i], q -> new long[5]);
                    sum[0] += completed[i];
                    sum[1] += failed[i];
                    sum[2] += retried[i];
                    sum[3] += cancelled[i];
                    sum[4] += reaped[i];
                }
                return Mono.empty();
            });
        }
    }

    @Test
    void aFlushSendsEachQueueOnceInNameOrderAndNothingWhenNothingHappened() {
        OutcomeTally tally = new OutcomeTally();
        Received store = new Received();
        tally.flush(store).block();
        assertThat(store.flushes).isEmpty();

        tally.count("mail", Outcome.COMPLETED);
        tally.count("billing", Outcome.FAILED);
        tally.count("mail", Outcome.COMPLETED);
        tally.count("mail", Outcome.REAPED);
        tally.flush(store).block();
        assertThat(store.flushes).containsExactly(List.of("billing", "mail"));
        assertThat(store.totals.get("mail")).containsExactly(2, 0, 0, 0, 1);
        assertThat(store.totals.get("billing")).containsExactly(0, 1, 0, 0, 0);

        tally.flush(store).block();
        assertThat(store.flushes).as("nothing new: no statement").hasSize(1);
    }

    @Test
    void countsOfAFailedFlushGoWithTheNext() {
        OutcomeTally tally = new OutcomeTally();
        Received store = new Received();
        store.failuresLeft.set(2);
        tally.count("mail", Outcome.RETRIED);
        tally.flush(store).block();
        tally.count("mail", Outcome.RETRIED);
        tally.flush(store).block();
        tally.count("mail", Outcome.CANCELLED);
        tally.flush(store).block();
        assertThat(store.flushes).hasSize(1);
        assertThat(store.totals.get("mail")).containsExactly(0, 0, 2, 1, 0);
    }

    /** A flush in flight when the engine stops finishes, and what was counted after it goes in one last flush. */
    @Test
    void stoppingWaitsForTheFlushInFlightAndFlushesTheRest() {
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        OutcomeTally tally = new OutcomeTally();
        Sinks.Empty<Void> slow = Sinks.empty();
        Received received = new Received();
        AtomicInteger calls = new AtomicInteger();
        OutcomeTally.Store store = (queues, completed, failed, retried, cancelled, reaped) ->
                received.add(queues, completed, failed, retried, cancelled, reaped)
                        .then(calls.incrementAndGet() == 1 ? slow.asMono() : Mono.empty());
        tally.start(store, Duration.ofSeconds(5), time);
        tally.count("mail", Outcome.COMPLETED);
        time.advanceTimeBy(Duration.ofSeconds(5)); // the first flush starts and hangs
        tally.count("mail", Outcome.COMPLETED);
        Mono<Void> stopping = tally.stop(store, Duration.ofMinutes(1)).subscribeOn(Schedulers.immediate()).cache();
        stopping.subscribe();
        assertThat(calls).hasValue(1);
        slow.tryEmitEmpty();
        stopping.block(Duration.ofSeconds(10));
        assertThat(calls).hasValue(2);
        assertThat(received.totals.get("mail")).containsExactly(2, 0, 0, 0, 0);
        time.advanceTimeBy(Duration.ofMinutes(1));
        assertThat(calls).as("no tick after the stop").hasValue(2);
    }
}
