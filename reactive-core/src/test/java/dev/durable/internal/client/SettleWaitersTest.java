package dev.durable.internal.client;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableTimeoutException;
import dev.durable.EngineClosedException;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.internal.sql.InstanceSql.Watch;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The shared settle-waiter on virtual time, its read replaced by a table in memory whose answers
 * the test releases: rounds coalesce, one read a tick covers every waiter, and waiters leave no trace.
 */
class SettleWaitersTest {

    private static final Duration TICK = Duration.ofMillis(200);

    private VirtualTimeScheduler time;
    /** The "database": status by id; an id not in it has no instance. */
    private final Map<Long, InstanceStatus> table = new ConcurrentHashMap<>();
    /** Each read's watches, and the answer the test releases for it. */
    private final List<List<Watch>> reads = new CopyOnWriteArrayList<>();
    private final List<Sinks.Empty<Void>> pending = new CopyOnWriteArrayList<>();
    private final AtomicReference<Throwable> failNext = new AtomicReference<>();
    private SettleWaiters waiters;

    @BeforeEach
    void setUp() {
        time = VirtualTimeScheduler.create();
        waiters = new SettleWaiters(this::read, TICK, Duration.ofSeconds(5), time);
    }

    @AfterEach
    void tearDown() {
        time.dispose();
    }

    /** A read answers when the test releases it, with what the table holds then. */
    private Flux<Instance> read(List<Watch> watches) {
        reads.add(List.copyOf(watches));
        Throwable failure = failNext.getAndSet(null);
        if (failure != null) {
            return Flux.error(failure);
        }
        Sinks.Empty<Void> release = Sinks.empty();
        pending.add(release);
        return release.asMono().thenMany(Flux.defer(() -> {
            List<Instance> rows = new ArrayList<>();
            for (Watch watch : watches) {
                InstanceStatus status = table.get(watch.id());
                if (status != null && status != watch.seen()) {
                    rows.add(instance(watch.id(), status));
                }
            }
            return Flux.fromIterable(rows);
        }));
    }

    private void releaseReads() {
        while (!pending.isEmpty()) {
            pending.remove(0).tryEmitEmpty();
        }
    }

    private static Instance instance(long id, InstanceStatus status) {
        Instant now = Instant.EPOCH;
        return new Instance(id, "job", 1, "q", 0, status, "run", null, null, null, 1, 3, now, List.of(), null, null,
                0, null, null, null, null, false, now, now);
    }

    @Test
    void aThousandWaitersShareOneReadPerTickAndLeaveNoTraceWhenAnswered() {
        List<Optional<Instance>> answered = new CopyOnWriteArrayList<>();
        for (long id = 1; id <= 1000; id++) {
            table.put(id, InstanceStatus.RUNNABLE);
        }
        for (long id = 1; id <= 1000; id++) {
            waiters.await(id, InstanceStatus::isTerminal, Duration.ofMinutes(1))
                    .subscribe(instance -> answered.add(Optional.of(instance)));
        }
        // The first waiter's read is in flight; the 999 that came meanwhile go together in the next.
        assertThat(reads).hasSize(1);
        releaseReads();
        assertThat(reads).extracting(List::size).containsExactly(1, 999);
        assertThat(reads.get(1)).allMatch(watch -> watch.seen() == null);
        releaseReads();

        // A tick: one read of every watched id, each with the status last seen.
        time.advanceTimeBy(TICK);
        assertThat(reads).hasSize(3);
        assertThat(reads.get(2)).hasSize(1000).allMatch(watch -> watch.seen() == InstanceStatus.RUNNABLE);
        for (long id = 1; id <= 600; id++) {
            table.put(id, InstanceStatus.DONE);
        }
        releaseReads();
        assertThat(answered).hasSize(600).allMatch(instance -> instance.orElseThrow().status() == InstanceStatus.DONE);
        assertThat(waiters.watched()).isEqualTo(400);

        time.advanceTimeBy(TICK);
        assertThat(reads.get(3)).hasSize(400);
        for (long id = 601; id <= 1000; id++) {
            table.put(id, InstanceStatus.FAILED);
        }
        releaseReads();
        assertThat(answered).hasSize(1000);
        assertThat(waiters.watched()).isZero();

        // Nobody waits: no tick reads anything.
        time.advanceTimeBy(TICK.multipliedBy(10));
        assertThat(reads).hasSize(4);
    }

    @Test
    void aChangeMadeHereIsReadAtOnceOnlyForTheIdsThatWantIt() {
        table.put(1L, InstanceStatus.EXECUTING);
        table.put(2L, InstanceStatus.EXECUTING);
        List<Instance> answered = new CopyOnWriteArrayList<>();
        waiters.await(1, InstanceStatus::isTerminal, Duration.ofMinutes(1)).subscribe(answered::add);
        waiters.await(2, InstanceStatus::isTerminal, Duration.ofMinutes(1)).subscribe(answered::add);
        releaseReads();
        releaseReads();
        int before = reads.size();

        waiters.changed(1, InstanceStatus.RUNNABLE); // not what anyone waits for: no read
        assertThat(reads).hasSize(before);
        table.put(1L, InstanceStatus.DONE);
        waiters.changed(1, InstanceStatus.DONE);
        assertThat(reads).hasSize(before + 1);
        assertThat(reads.get(before)).containsExactly(new Watch(1, InstanceStatus.EXECUTING));
        releaseReads();
        assertThat(answered).extracting(Instance::id).containsExactly(1L);
        assertThat(waiters.watched()).isEqualTo(1);
    }

    @Test
    void anUnknownIdIsAnsweredEmpty() {
        List<String> seen = new CopyOnWriteArrayList<>();
        waiters.await(42, InstanceStatus::isTerminal, Duration.ofMinutes(1))
                .subscribe(instance -> seen.add("value"), error -> seen.add("error"), () -> seen.add("empty"));
        releaseReads();
        assertThat(seen).containsExactly("empty");
        assertThat(waiters.watched()).isZero();
    }

    @Test
    void aTimedOutWaiterCarriesItsLastSnapshotAndLeavesNoTrace() {
        table.put(7L, InstanceStatus.AWAITING_SIGNAL);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        waiters.await(7, InstanceStatus::isTerminal, Duration.ofSeconds(3)).subscribe(null, failed::set);
        releaseReads();
        AtomicReference<Throwable> early = new AtomicReference<>();
        // A waiter that times out before anything was read has no snapshot.
        table.put(8L, InstanceStatus.RUNNABLE);
        waiters.await(8, InstanceStatus::isTerminal, Duration.ofMillis(50)).subscribe(null, early::set);
        time.advanceTimeBy(Duration.ofMillis(50));
        assertThat(early.get()).isInstanceOfSatisfying(DurableTimeoutException.class,
                timeout -> assertThat(timeout.lastSeen()).isEmpty());

        time.advanceTimeBy(Duration.ofSeconds(3));
        releaseReads();
        assertThat(failed.get()).isInstanceOfSatisfying(DurableTimeoutException.class, timeout -> {
            assertThat(timeout.lastSeen()).get().extracting(Instance::status).isEqualTo(InstanceStatus.AWAITING_SIGNAL);
            assertThat(timeout).hasMessageContaining("instance 7").hasMessageContaining("awaiting_signal");
        });
        assertThat(waiters.watched()).isZero();
    }

    @Test
    void aCancelledWaiterLeavesNoTraceAndCurrentReadsAfresh() {
        table.put(3L, InstanceStatus.EXECUTING);
        Disposable waiting = waiters.await(3, InstanceStatus::isTerminal, Duration.ofMinutes(1)).subscribe();
        releaseReads();
        assertThat(waiters.watched()).isEqualTo(1);
        waiting.dispose();
        assertThat(waiters.watched()).isZero();

        // current() reads the whole row whatever was seen before, and shares the round.
        waiters.await(3, InstanceStatus::isTerminal, Duration.ofMinutes(1)).subscribe();
        releaseReads();
        List<Instance> now = new CopyOnWriteArrayList<>();
        waiters.current(3).subscribe(now::add);
        assertThat(reads.get(reads.size() - 1)).containsExactly(new Watch(3, null));
        releaseReads();
        assertThat(now).extracting(Instance::status).containsExactly(InstanceStatus.EXECUTING);
        assertThat(waiters.watched()).isEqualTo(1);
    }

    @Test
    void aFailedReadIsTriedAgainAtTheNextTickAndAClosedEngineEndsTheWaits() {
        table.put(5L, InstanceStatus.DONE);
        List<Instance> answered = new CopyOnWriteArrayList<>();
        failNext.set(new IllegalStateException("connection lost"));
        waiters.await(5, InstanceStatus::isTerminal, Duration.ofMinutes(1)).subscribe(answered::add);
        assertThat(answered).isEmpty();
        time.advanceTimeBy(TICK);
        releaseReads();
        assertThat(answered).hasSize(1);

        table.put(6L, InstanceStatus.RUNNABLE);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        failNext.set(new EngineClosedException("test"));
        waiters.await(6, InstanceStatus::isTerminal, Duration.ofMinutes(1)).subscribe(null, failed::set);
        assertThat(failed.get()).isInstanceOf(EngineClosedException.class);
        assertThat(waiters.watched()).isZero();
    }
}
