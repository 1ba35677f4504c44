package dev.durable.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

class HandlerLaneTest {

    /** Runs {@code runs} starts through the lane as the executor does: subscribeOn the lane's scheduler. */
    private static Set<String> runThrough(HandlerLane lane, int runs) {
        Set<String> threads = ConcurrentHashMap.newKeySet();
        List<Integer> done = Flux.range(0, runs)
                .flatMap(i -> Mono.fromSupplier(() -> {
                    lane.landed();
                    threads.add(Thread.currentThread().getName());
                    return i;
                }).subscribeOn(lane.scheduler()), runs)
                .collectList()
                .block(Duration.ofSeconds(30));
        assertThat(done).hasSize(runs);
        return threads;
    }

    @Test
    void onANonBlockingSchedulerRunsGoOverTogether() {
        Scheduler parallel = Schedulers.newParallel("lane-test", 2);
        try {
            AtomicInteger drains = new AtomicInteger();
            HandlerLane lane = new HandlerLane(parallel);
            lane.afterDrain(drains::incrementAndGet);
            runThrough(lane, 1);
            assertThat(lane.batched()).isTrue();
            Set<String> threads = runThrough(lane, 1_000);
            assertThat(threads).allMatch(name -> name.startsWith("lane-test"));
            // Batched: far fewer drains than runs (each drain ran many starts on one task).
            assertThat(drains.get()).isLessThan(1_000);
        } finally {
            parallel.dispose();
        }
    }

    @Test
    void runsOfOneBatchStillSpreadOverTheSchedulersThreads() throws InterruptedException {
        // Two runs that each wait for the other to start: held to one drain thread they never would.
        Assumptions.assumeTrue(Schedulers.DEFAULT_POOL_SIZE >= 2, "one core: one drain at a time");
        Scheduler parallel = Schedulers.newParallel("lane-spread", 2);
        try {
            HandlerLane lane = new HandlerLane(parallel);
            runThrough(lane, 1);
            assertThat(lane.batched()).isTrue();
            CountDownLatch bothStarted = new CountDownLatch(2);
            CountDownLatch finished = new CountDownLatch(2);
            AtomicInteger met = new AtomicInteger();
            for (int i = 0; i < 2; i++) {
                Mono.fromRunnable(() -> {
                    bothStarted.countDown();
                    try {
                        if (bothStarted.await(20, TimeUnit.SECONDS)) {
                            met.incrementAndGet();
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    finished.countDown();
                }).subscribeOn(lane.scheduler()).subscribe();
            }
            assertThat(finished.await(60, TimeUnit.SECONDS)).isTrue();
            assertThat(met).hasValue(2);
        } finally {
            parallel.dispose();
        }
    }

    @Test
    void onASchedulerThatMayBlockEachRunGetsItsOwnTask() throws InterruptedException {
        Scheduler elastic = Schedulers.newBoundedElastic(8, 1_000, "lane-elastic");
        try {
            HandlerLane lane = new HandlerLane(elastic);
            runThrough(lane, 1);
            assertThat(lane.batched()).isFalse();
            assertThat(lane.scheduler()).isSameAs(elastic);
            // Two blocking runs go at once: neither waits behind the other.
            CountDownLatch both = new CountDownLatch(2);
            List<Boolean> met = Flux.range(0, 2)
                    .flatMap(i -> Mono.fromCallable(() -> {
                        both.countDown();
                        return both.await(10, TimeUnit.SECONDS);
                    }).subscribeOn(lane.scheduler()), 2)
                    .collectList()
                    .block(Duration.ofSeconds(30));
            assertThat(met).containsOnly(true);
        } finally {
            elastic.dispose();
        }
    }

    @Test
    void aStartDisposedBeforeItRanNeverRuns() throws InterruptedException {
        Scheduler parallel = Schedulers.newParallel("lane-dispose", 1);
        try {
            HandlerLane lane = new HandlerLane(parallel);
            CountDownLatch blocker = new CountDownLatch(1);
            CountDownLatch started = new CountDownLatch(1);
            AtomicInteger ran = new AtomicInteger();
            lane.schedule(() -> {
                started.countDown();
                try {
                    blocker.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                }
            });
            assertThat(started.await(10, TimeUnit.SECONDS)).isTrue();
            lane.schedule(ran::incrementAndGet).dispose();
            lane.schedule(ran::incrementAndGet);
            blocker.countDown();
            CountDownLatch after = new CountDownLatch(1);
            lane.schedule(after::countDown);
            assertThat(after.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(ran).hasValue(1);
        } finally {
            parallel.dispose();
        }
    }
}
