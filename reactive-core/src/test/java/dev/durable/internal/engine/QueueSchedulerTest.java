package dev.durable.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.PickTrigger;
import dev.durable.QueueOptions;
import dev.durable.internal.sql.Rows.ClaimedRow;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The pipeline's timing on virtual time, with its I/O replaced by recording collaborators: the
 * adaptive idle poll, the poke window, the heartbeat cadence and the refill from the buffer.
 */
class QueueSchedulerTest {

    private static final Duration POLL = Duration.ofMillis(100);
    private static final Duration MAX_POLL = Duration.ofSeconds(1);
    private static final Duration HEARTBEAT = Duration.ofMillis(500);
    private static final Duration LEASE = Duration.ofSeconds(3);
    private static final Duration POKE_WINDOW = Duration.ofMillis(10);

    private VirtualTimeScheduler time;
    private final Sinks.Many<String> pokes = Sinks.many().multicast().directBestEffort();
    /** What each pick was asked for, and when. */
    private final List<long[]> picks = new CopyOnWriteArrayList<>();
    /** Rows the next picks hand out, one list per pick; an empty queue answers nothing. */
    private final List<List<ClaimedRow>> backlog = new CopyOnWriteArrayList<>();
    private final List<List<Long>> beats = new CopyOnWriteArrayList<>();
    private final Map<Long, Sinks.One<Executor.RunResult>> runs = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong();
    private Duration beatTakes = Duration.ZERO;
    /** Runs end as they start (a run that finds at once it has nothing to do), without a thread hop. */
    private boolean runsEndAtOnce;
    private final AtomicLong runsStarted = new AtomicLong();
    /** What the heartbeat answers: held rows not in {@code lost} are renewed; those in {@code cancel} flagged. */
    private final java.util.Set<Long> lost = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final java.util.Set<Long> cancel = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Held rows the heartbeat answers as still held but left unrenewed (another transaction locks them). */
    private final java.util.Set<Long> locked = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final List<List<ClaimedRow>> released = new CopyOnWriteArrayList<>();
    private final Map<Long, dev.durable.Cancellation> cancellations = new ConcurrentHashMap<>();
    private final Map<Long, java.util.function.BooleanSupplier> claimsLost = new ConcurrentHashMap<>();
    /** Each run's call to say that only its outcome's commit is left. */
    private final Map<Long, Runnable> committings = new ConcurrentHashMap<>();

    private Beat.Renewal renewal(List<Long> held) {
        java.util.Set<Long> renewed = new java.util.HashSet<>(held);
        renewed.removeAll(lost);
        java.util.Set<Long> leftLocked = new java.util.HashSet<>(renewed);
        leftLocked.retainAll(locked);
        renewed.removeAll(locked);
        java.util.Set<Long> flagged = new java.util.HashSet<>(held);
        flagged.removeAll(lost);
        flagged.retainAll(cancel);
        return new Beat.Renewal(renewed, leftLocked, flagged);
    }
    private QueueScheduler scheduler;

    @BeforeEach
    void setUp() {
        time = VirtualTimeScheduler.create();
    }

    @AfterEach
    void tearDown() {
        if (scheduler != null) {
            scheduler.close().subscribe();
            time.advanceTimeBy(Duration.ofMinutes(1));
        }
        time.dispose();
    }

    private QueueScheduler start(QueueOptions options) {
        scheduler = new QueueScheduler(options, "worker-1",
                limit -> {
                    picks.add(new long[] {time.now(java.util.concurrent.TimeUnit.MILLISECONDS), limit});
                    List<ClaimedRow> rows = backlog.isEmpty() ? List.of() : backlog.remove(0);
                    return Mono.just(new Picker.Picked(rows, 0));
                },
                held -> {
                    beats.add(List.copyOf(held));
                    Beat.Renewal renewal = renewal(held);
                    return beatTakes.isZero() ? Mono.just(renewal) : Mono.delay(beatTakes, time).thenReturn(renewal);
                },
                new Releaser() {
                    @Override
                    public Mono<Void> release(List<ClaimedRow> rows) {
                        return Mono.fromRunnable(() -> released.add(rows));
                    }

                },
                (row, cancellation, claimLost, committing) -> {
                    cancellations.put(row.id(), cancellation);
                    claimsLost.put(row.id(), claimLost);
                    committings.put(row.id(), committing);
                    runsStarted.incrementAndGet();
                    if (runsEndAtOnce) {
                        return Mono.just(Executor.RunResult.COMMITTED);
                    }
                    return runs.computeIfAbsent(row.id(), id -> Sinks.one()).asMono();
                },
                pokes.asFlux(), HEARTBEAT, LEASE, POKE_WINDOW, time,
                () -> time.now(java.util.concurrent.TimeUnit.NANOSECONDS), new SchedulerCounters(),
                new Telemetry(new SimpleMeterRegistry(), ObservationRegistry.NOOP, null, 16));
        scheduler.start();
        return scheduler;
    }

    private static QueueOptions queue(int concurrency, int prefetch, int minDemand) {
        return QueueOptions.builder("q").concurrency(concurrency).prefetch(prefetch).minDemand(minDemand)
                .pollInterval(POLL).maxPollInterval(MAX_POLL).build();
    }

    private List<ClaimedRow> rows(int n) {
        List<ClaimedRow> rows = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            long id = nextId.incrementAndGet();
            rows.add(new ClaimedRow(id, "worker-1", "t", 1, "q", 0, id, "run", null, 1, 20, null, null, List.of(),
                    List.of(), List.of(), null, null));
        }
        return rows;
    }

    private void finish(long id) {
        runs.computeIfAbsent(id, key -> Sinks.one()).tryEmitValue(Executor.RunResult.COMMITTED);
    }

    private List<Long> pickTimes() {
        return picks.stream().map(pick -> pick[0]).toList();
    }

    @Test
    void anIdleQueuePollsLessAndLessOftenUpToTheCeilingAndSnapsBackOnWork() {
        start(queue(2, 0, 1));
        assertThat(pickTimes()).containsExactly(0L); // the pipeline's first demand

        time.advanceTimeBy(Duration.ofMillis(3500));
        // Each empty poll of an idle queue doubles the next wait: 100, 200, 400, 800, then the 1 s cap.
        assertThat(pickTimes()).containsExactly(0L, 100L, 300L, 700L, 1500L, 2500L, 3500L);
        assertThat(scheduler.currentPoll()).isEqualTo(MAX_POLL);

        backlog.add(rows(1));
        time.advanceTimeBy(Duration.ofSeconds(1)); // the poll at 4500 finds a row
        assertThat(scheduler.currentPoll()).isEqualTo(POLL);
        assertThat(scheduler.stats().picks(PickTrigger.POLL)).isEqualTo(7);
    }

    @Test
    void aPokeStartsAnIdlePickAtOnceAndABurstInsideTheWindowCollapsesIntoOne() {
        start(queue(2, 0, 1));
        time.advanceTimeBy(Duration.ofMillis(50));
        int before = picks.size();

        pokes.tryEmitNext("q");
        assertThat(picks).hasSize(before + 1); // leading edge: no wait
        for (int i = 0; i < 5; i++) {
            time.advanceTimeBy(Duration.ofMillis(1));
            pokes.tryEmitNext("q");
        }
        pokes.tryEmitNext("other-queue");
        assertThat(picks).hasSize(before + 1);
        time.advanceTimeBy(POKE_WINDOW);
        // The five pokes inside the window became one, handled when the window closed.
        assertThat(picks).hasSize(before + 2);
        assertThat(scheduler.stats().pokesHandled()).isEqualTo(2);
        assertThat(scheduler.stats().picks(PickTrigger.POKE)).isEqualTo(2);
    }

    @Test
    void aBusySchedulerDropsPokesAndRefillsOnItsOwn() {
        start(queue(1, 0, 1));
        backlog.add(rows(1));
        time.advanceTimeBy(POLL); // the row is running now
        int before = picks.size();
        pokes.tryEmitNext("q");
        assertThat(picks).hasSize(before);
        assertThat(scheduler.stats().pokesDropped()).isEqualTo(1);
    }

    @Test
    void theHeartbeatRenewsEveryHeldRowOncePerIntervalAndNeverOverlaps() {
        start(queue(2, 3, 1));
        backlog.add(rows(5)); // two run, three wait in the buffer
        time.advanceTimeBy(POLL);
        assertThat(scheduler.running()).isEqualTo(2);
        assertThat(scheduler.buffered()).isEqualTo(3);

        time.advanceTimeBy(HEARTBEAT.multipliedBy(4));
        assertThat(beats).hasSize(4);
        assertThat(beats).allSatisfy(held -> assertThat(held).containsExactlyInAnyOrder(1L, 2L, 3L, 4L, 5L));

        // A beat slower than the interval: the ticks that come while it runs are dropped, not queued.
        beatTakes = HEARTBEAT.multipliedBy(3);
        beats.clear();
        time.advanceTimeBy(HEARTBEAT.multipliedBy(8));
        assertThat(beats).hasSizeBetween(2, 3);
        assertThat(scheduler.stats().heartbeatsSkipped()).isPositive();
    }

    @Test
    void aFinishedRunRefillsFromTheBufferAndPicksOnlyWhenMinDemandIsReached() {
        start(queue(2, 2, 3));
        backlog.add(rows(4)); // a full pick: two run, two buffered
        time.advanceTimeBy(POLL);
        int afterFirst = picks.size();
        assertThat(scheduler.running()).isEqualTo(2);
        assertThat(scheduler.buffered()).isEqualTo(2);

        finish(1); // refilled from the buffer, no pick
        assertThat(picks).hasSize(afterFirst);
        assertThat(scheduler.running()).isEqualTo(2);
        assertThat(scheduler.buffered()).isEqualTo(1);

        finish(2); // refilled again; the buffer is empty, but demand (2 of a ceiling of 4) is below min demand 3
        assertThat(picks).hasSize(afterFirst);
        assertThat(scheduler.buffered()).isZero();
        finish(3); // demand reaches 3: one pick, for every free claim
        assertThat(picks).hasSize(afterFirst + 1);
        assertThat(picks.get(afterFirst)[1]).isEqualTo(3);
    }

    @Test
    void aRunWaitingOnlyForItsCommitFreesItsSlotButStaysHeldUntilItEnds() {
        start(queue(2, 4, 1));
        backlog.add(rows(6)); // the ceiling: two run, four buffered
        time.advanceTimeBy(POLL);
        int afterFirst = picks.size();
        assertThat(runsStarted).hasValue(2);

        committings.get(1L).run(); // run 1's handler is done: its slot goes to row 3, no pick
        assertThat(runsStarted).hasValue(3);
        assertThat(scheduler.stats().running()).isEqualTo(2);
        assertThat(scheduler.stats().committing()).isEqualTo(1);
        assertThat(scheduler.stats().buffered()).isEqualTo(3);
        assertThat(picks).hasSize(afterFirst); // still six held: committing counts against the ceiling

        committings.get(1L).run(); // said twice: one slot, not two
        assertThat(runsStarted).hasValue(3);
        committings.get(2L).run();
        // Handlers never exceed the concurrency, whatever commits are pending: one more started, two wait.
        assertThat(runsStarted).hasValue(4);
        assertThat(scheduler.stats().running()).isEqualTo(2);
        assertThat(scheduler.stats().committing()).isEqualTo(2);
        assertThat(scheduler.stats().buffered()).isEqualTo(2);

        // A committing row's lease is still renewed.
        time.advanceTimeBy(HEARTBEAT);
        assertThat(beats.get(beats.size() - 1)).contains(1L, 2L);

        finish(1); // committed: the row leaves, demand is 1, one pick
        assertThat(scheduler.stats().committing()).isEqualTo(1);
        assertThat(picks).hasSize(afterFirst + 1);
        assertThat(picks.get(afterFirst)[1]).isEqualTo(1);
    }

    @Test
    void aPickThatClaimsAnIdStillBufferedUnderALapsedClaimReplacesIt() {
        start(queue(1, 2, 1));
        List<ClaimedRow> first = rows(3); // one runs, two buffered
        backlog.add(first);
        time.advanceTimeBy(POLL);
        // Row 3's buffered claim lapsed meanwhile and the reaper returned it: the next pick claims it again.
        ClaimedRow again = new ClaimedRow(3, "worker-1", "t", 2, "q", 0, 3, "run", null, 1, 20, null, null,
                List.of(), List.of(), List.of(), null, null);
        backlog.add(List.of(again));
        finish(1); // row 2 starts; demand 1 picks row 3's new claim

        assertThat(scheduler.stats().buffered()).isEqualTo(1); // the new claim only
        assertThat(scheduler.stats().leasesLost()).isEqualTo(1);
        finish(2);
        assertThat(runsStarted).hasValue(3); // rows 1, 2 and 3 once
        assertThat(scheduler.stats().buffered()).isZero();
    }

    @Test
    void runsThatEndAsTheyStartDrainABigBufferWithoutNesting() {
        runsEndAtOnce = true;
        start(queue(1, 20_000, 1));
        backlog.add(rows(20_001)); // one slot: each run's end starts the next from inside the last
        time.advanceTimeBy(POLL);
        assertThat(runsStarted).hasValue(20_001);
        assertThat(scheduler.running()).isZero();
        assertThat(scheduler.buffered()).isZero();
        assertThat(scheduler.stats().completed()).isEqualTo(20_001);
    }

    @Test
    void closeGivesBufferedRowsBackAndWaitsForRunningOnesUpToTheDrainTimeout() {
        start(QueueOptions.builder("q").concurrency(1).prefetch(2).pollInterval(POLL)
                .drainTimeout(Duration.ofSeconds(5)).build());
        backlog.add(rows(3));
        time.advanceTimeBy(POLL);

        boolean[] closed = new boolean[1];
        scheduler.close().subscribe(null, null, () -> closed[0] = true);
        assertThat(released).hasSize(1);
        assertThat(released.get(0)).extracting(ClaimedRow::id).containsExactly(2L, 3L);
        time.advanceTimeBy(Duration.ofSeconds(4));
        assertThat(closed[0]).isFalse();
        time.advanceTimeBy(Duration.ofSeconds(2)); // past the drain timeout: the run is left to the reaper
        assertThat(closed[0]).isTrue();
        assertThat(scheduler.stats().drainAbandoned()).isEqualTo(1);
        assertThat(runs.get(1L).currentSubscriberCount()).as("the abandoned run is disposed").isZero();
        int picksAfterClose = picks.size();
        time.advanceTimeBy(Duration.ofSeconds(10));
        assertThat(picks).hasSize(picksAfterClose);
    }

    @Test
    void aBeatThatFindsRowsLostOrCancelledDropsThemFromTheBufferAndStopsTheirRuns() {
        start(queue(2, 3, 1));
        backlog.add(rows(5)); // 1 and 2 run; 3, 4 and 5 wait
        time.advanceTimeBy(POLL);
        lost.add(2L);
        lost.add(3L);
        cancel.add(1L);
        cancel.add(4L);
        time.advanceTimeBy(HEARTBEAT);

        // Buffered: 3 was lost and 4 cancelled: both given back unstarted (3 stays with its new owner
        // if it has one, 4 ends cancelled).
        assertThat(released).hasSize(1);
        assertThat(released.get(0)).extracting(ClaimedRow::id).containsExactly(3L, 4L);
        // Running: 1 was cancelled and 2 lost: both runs are told to stop; 5 stays buffered.
        assertThat(cancellations.get(1L).isRequested()).isTrue();
        assertThat(cancellations.get(2L).isRequested()).isTrue();
        // Told apart: 1's run ends cancelled, 2's commits nothing.
        assertThat(claimsLost.get(1L).getAsBoolean()).isFalse();
        assertThat(claimsLost.get(2L).getAsBoolean()).isTrue();
        assertThat(scheduler.buffered()).isEqualTo(1);
        assertThat(scheduler.stats().leasesLost()).isEqualTo(2);
        assertThat(scheduler.stats().runsCancelled()).isEqualTo(2);

        // The stopped runs end; 5 starts, and is never stopped.
        finish(1);
        finish(2);
        assertThat(cancellations.get(5L).isRequested()).isFalse();
        assertThat(cancellations).doesNotContainKeys(3L, 4L);
    }

    @Test
    void aBufferedRowNoBeatRenewedForALeaseIsGivenBackNotStarted() {
        start(queue(1, 3, 1));
        backlog.add(rows(3)); // 1 runs; 2 and 3 wait
        time.advanceTimeBy(POLL);
        assertThat(scheduler.buffered()).isEqualTo(2);
        // The database stops answering: no beat comes back for longer than the lease.
        beatTakes = Duration.ofMinutes(10);
        time.advanceTimeBy(LEASE.plus(HEARTBEAT));
        assertThat(scheduler.buffered()).isEqualTo(2);

        finish(1); // a slot frees: the buffered rows' leases may have run out, so neither starts
        assertThat(cancellations).containsOnlyKeys(1L);
        assertThat(released).hasSize(1);
        assertThat(released.get(0)).extracting(ClaimedRow::id).containsExactly(2L, 3L);
        assertThat(scheduler.buffered()).isZero();
        assertThat(scheduler.stats().leasesLost()).isEqualTo(2);
    }

    @Test
    void aBufferedRowKeepsItsLeaseWhileBeatsRenewIt() {
        start(queue(1, 3, 1));
        backlog.add(rows(3));
        time.advanceTimeBy(POLL);
        time.advanceTimeBy(LEASE.multipliedBy(3)); // beats every 500 ms renew 2 and 3 all along

        finish(1);
        assertThat(cancellations).containsOnlyKeys(1L, 2L);
        assertThat(released).isEmpty();
        assertThat(scheduler.stats().leasesLost()).isZero();
    }

    @Test
    void aRowTheBeatFindsLockedStaysHeldButItsLeaseDeadlineDoesNotMove() {
        start(queue(1, 3, 1));
        backlog.add(rows(3)); // 1 runs; 2 and 3 wait
        time.advanceTimeBy(POLL);
        locked.add(2L); // every beat finds 2 locked by another transaction: still held, never renewed
        time.advanceTimeBy(LEASE.multipliedBy(3));
        assertThat(released).isEmpty(); // neither given back as lost while the beats say it is held
        assertThat(scheduler.stats().leasesLost()).isZero();

        finish(1); // a slot frees: 2's lease deadline has passed (no beat renewed it), 3's has not
        assertThat(released).hasSize(1);
        assertThat(released.get(0)).extracting(ClaimedRow::id).containsExactly(2L);
        assertThat(cancellations).containsOnlyKeys(1L, 3L);
    }
}
