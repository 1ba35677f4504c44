package dev.durable.internal.engine;

import dev.durable.Cancellation;
import dev.durable.PickTrigger;
import dev.durable.QueueOptions;
import dev.durable.QueueStats;
import dev.durable.internal.engine.Demand.Trigger;
import dev.durable.internal.sql.Rows.ClaimedRow;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * One queue's demand-driven pick pipeline on one engine: claims rows with a lease into a small
 * buffer and runs at most {@code concurrency} of them.
 *
 * <p>At most {@code concurrency} handlers run at once (the run slots). A run frees its slot as
 * soon as all it has left is its outcome's group commit, which the buffer fills with no round
 * trip; until it commits, the row is still held. The scheduler claims up to
 * {@code concurrency + prefetch} rows, running, committing and buffered together, and picks when
 * the gap reaches {@code minDemand}, or at once when fully idle ({@link Demand}). Each run is subscribed on its own, not through a
 * {@code flatMap}: flatMap's drain walks every active inner when one completes, which at 256 runs
 * cost an eighth of the engine's CPU at saturation. The rows held, and what a heartbeat's verdict
 * on them is, are {@link HeldRows}: a buffered row whose lease no beat renewed in time (the
 * database slow or away) is never started, it is given back and counted lost. The idle poll
 * (doubled while idle picks find nothing), the pokes and the heartbeat are {@link SchedulerLoops}:
 * all of them call into the same decision, which is made under this object's lock; every pick,
 * release and run start happens after the lock is let go.
 *
 * <p>The I/O is the collaborators': the {@link Picker} claims, the {@link Beat} renews leases, the
 * {@link Releaser} gives unstarted rows back and the {@link Runner} runs a row to its committed
 * outcome. Timers run on the given scheduler, so tests drive them on virtual time.
 */
public final class QueueScheduler {

    private static final Logger log = Loggers.getLogger(QueueScheduler.class);
    /**
     * The most each shutdown step that talks to the database may take (giving buffered rows back,
     * closing the transport, the pool): close() ends within the drain timeout plus a few of these,
     * whatever the database does. What a step leaves undone, the leases undo.
     */
    public static final Duration CLOSE_STEP = Duration.ofSeconds(2);

    private final QueueOptions options;
    private final String worker;
    private final Picker picker;
    private final Beat beat;
    private final Releaser releaser;
    private final Runner runner;
    private final Flux<String> pokes;
    private final Scheduler timer;
    /** A monotonic clock in nanoseconds (System::nanoTime; the virtual time in tests): lease deadlines. */
    private final LongSupplier nanoClock;
    private final SchedulerCounters counters;
    private final Telemetry telemetry;

    /** The rows claimed: the buffer is guarded by this, the runs are not. */
    private final HeldRows held;
    // Guarded by this.
    private boolean started;
    /**
     * A dispatch is under way (on any thread, or further up this one's stack: a run that ended at
     * once); the triggers that came meanwhile wait here, each kind once, and it serves them in turn.
     */
    private boolean dispatching;
    private final ArrayDeque<Trigger> missedTriggers = new ArrayDeque<>();
    private boolean picking;
    private boolean pokedWhilePicking;
    private boolean closed;
    /** The last pick found nothing: the queue looked empty to this scheduler. */
    private boolean lastPickEmpty;
    private Duration currentPoll;
    /** Completes when the pick in flight (if any) has ended; close() waits for it. */
    private Mono<Void> currentPick = Mono.empty();
    private @Nullable Mono<Void> closing;

    private final Sinks.Empty<Void> drained = Sinks.empty();
    /** The poll, pokes and heartbeats. */
    private final SchedulerLoops loops;
    /**
     * The runs going: a close that gives up on them disposes them. A set, not Reactor's composite
     * (a list: removing a finished run would walk it, the cost the flatMap had).
     */
    private final Set<RunSubscriber> runs = ConcurrentHashMap.newKeySet();
    /** The runs were disposed (a close gave up on them): a run started since is disposed at once. */
    private volatile boolean runsDisposed;

    QueueScheduler(QueueOptions options, String worker, Picker picker, Beat beat, Releaser releaser, Runner runner,
            Flux<String> pokes, Duration heartbeatInterval, Duration leaseTtl, Duration pokeWindow, Scheduler timer,
            LongSupplier nanoClock, SchedulerCounters counters, Telemetry telemetry) {
        this.options = options;
        this.worker = worker;
        this.picker = picker;
        this.beat = beat;
        this.releaser = releaser;
        this.runner = runner;
        this.pokes = pokes;
        this.held = new HeldRows(leaseTtl.toNanos());
        this.timer = timer;
        this.nanoClock = nanoClock;
        this.counters = counters;
        this.loops = new SchedulerLoops(options.name(), heartbeatInterval, pokeWindow, timer, counters);
        this.telemetry = telemetry;
        this.currentPoll = options.pollInterval();
    }

    public String queue() {
        return options.name();
    }

    public String worker() {
        return worker;
    }

    /** Runs whose handler is going: each holds a run slot. */
    int running() {
        return held.handling();
    }

    /** Runs whose handler has finished and whose outcome waits for its commit. */
    int committing() {
        return held.committing();
    }

    /** Rows claimed and waiting for a free run slot. */
    synchronized int buffered() {
        return held.buffered();
    }

    /** The idle poll interval now in force (grows while idle, snaps back on work). */
    synchronized Duration currentPoll() {
        return currentPoll;
    }

    /** A snapshot of what this scheduler is doing and has done. */
    public QueueStats stats() {
        int buffered;
        Duration poll;
        synchronized (this) {
            buffered = held.buffered();
            poll = currentPoll;
        }
        return counters.snapshot(options, worker, held.handling(), held.committing(), buffered, poll);
    }

    SchedulerCounters counters() {
        return counters;
    }

    /** Starts claiming: the run slots and the loops ({@link SchedulerLoops}). No I/O of its own. */
    public void start() {
        synchronized (this) {
            started = true;
        }
        dispatch(Trigger.DEMAND);
        loops.start(this::currentPoll, () -> dispatch(Trigger.POLL), pokes, () -> dispatch(Trigger.POKE),
                this::beatOnce, beat::renewSlots);
    }

    /** One heartbeat: renews the leases of the rows held, then acts on what it found. */
    private Mono<?> beatOnce() {
        List<Long> ids = heldIds();
        long sentAt = now();
        return beat.beat(ids).doOnNext(renewal -> renewed(ids, renewal, sentAt));
    }

    /** The ids of every row held: running and buffered. */
    private synchronized List<Long> heldIds() {
        return held.ids();
    }

    /**
     * What a heartbeat found about the rows it held ({@link HeldRows#afterBeat}): a buffered row no
     * longer this worker's or whose cancel was requested is given back unstarted (the release's guard
     * leaves another holder's row alone; a cancelled one ends cancelled at once); a running row that
     * is either is stopped (its handler's subscription is disposed; a lost one commits nothing, a
     * cancelled one ends cancelled).
     */
    private void renewed(List<Long> ids, Beat.Renewal renewal, long sentAt) {
        HeldRows.Verdict verdict;
        synchronized (this) {
            verdict = held.afterBeat(ids, renewal, sentAt);
        }
        if (verdict.giveBackAndStop(queue(), releaser, counters)) {
            dispatch(Trigger.DEMAND); // the buffer shrank: room for more
        }
    }

    // ---- Claim-on-insert ---------------------------------------------------------------------

    /**
     * Reserves up to {@code wanted} slots for rows about to be inserted already claimed by this
     * scheduler's worker. Only a fully idle scheduler whose last pick found nothing reserves: it
     * believes the queue empty, so taking new rows first passes over no older, more urgent row.
     * Returns how many slots it reserved.
     */
    synchronized int reserve(int wanted) {
        return closed || picking || !started || !lastPickEmpty ? 0
                : held.reserve(Math.min(wanted, options.claimCeiling()), now());
    }

    /** The rows inserted claimed under a reservation of {@code slots}: into the buffer they go. */
    void claimedOnInsert(int slots, List<ClaimedRow> rows) {
        telemetry.picked(queue(), Trigger.INSERT, rows);
        boolean accepted;
        synchronized (this) {
            counters.picksBy(PickTrigger.INSERT).incrementAndGet();
            counters.picked.addAndGet(rows.size());
            lastPickEmpty = false;
            currentPoll = options.pollInterval();
            accepted = !closed;
            held.claimedOnInsert(slots, accepted ? rows : List.of());
        }
        if (accepted) {
            dispatch(Trigger.INSERT);
        } else {
            releaser.release(rows).subscribe(null, error -> log.warn("queue {}: release failed", queue(), error));
        }
    }

    /** The insert under a reservation failed: the slots are free again. */
    synchronized void cancelReservation(int slots) {
        held.claimedOnInsert(slots, List.of());
    }

    // ---- Demand ------------------------------------------------------------------------------

    /**
     * Hands buffered rows to free slots and decides whether to pick. One dispatch at a time: a run
     * that ends as it starts dispatches again from inside the one starting it, and so would nest
     * without bound; instead the trigger is left to the dispatch under way, which serves it next.
     */
    private void dispatch(Trigger trigger) {
        synchronized (this) {
            if (dispatching) {
                if (!missedTriggers.contains(trigger)) {
                    missedTriggers.add(trigger);
                }
                return;
            }
            dispatching = true;
        }
        Trigger next = trigger;
        try {
            while (next != null) {
                dispatchOnce(next);
                synchronized (this) {
                    next = missedTriggers.poll();
                    dispatching = next != null;
                }
            }
        } catch (Throwable e) {
            // The triggers left waiting are served by the next dispatch.
            synchronized (this) {
                dispatching = false;
            }
            throw e;
        }
    }

    /** One decision for one trigger; the I/O (starts, give-backs, the pick) runs after the lock. */
    private void dispatchOnce(Trigger trigger) {
        List<ClaimedRow> toRun = List.of();
        List<ClaimedRow> lapsed = List.of();
        int pickSize;
        Sinks.Empty<Void> pickDone = null;
        synchronized (this) {
            if (closed) {
                return;
            }
            // The free run slots: concurrency less the runs whose handler is going (a run waiting
            // only for its outcome's commit holds a claim, not a slot).
            int freeSlots = options.concurrency() - held.handling();
            if (started && freeSlots > 0 && held.buffered() > 0) {
                toRun = new ArrayList<>();
                lapsed = new ArrayList<>();
                // A row no beat renewed for a lease (the database is slow or away) is not started.
                held.take(freeSlots, now(), toRun, lapsed);
            }
            pickSize = pickSize(trigger);
            if (pickSize > 0) {
                picking = true;
                // Set with the flag, so a close() from now on waits for this pick.
                pickDone = Sinks.empty();
                currentPick = pickDone.asMono();
            }
        }
        if (!lapsed.isEmpty()) {
            HeldRows.giveBackLapsed(queue(), lapsed, releaser, counters);
        }
        for (ClaimedRow row : toRun) {
            start(row);
        }
        if (pickDone != null) {
            pick(pickSize, trigger, pickDone);
        }
    }

    /** Now on the monotonic clock, in nanoseconds. */
    private long now() {
        return nanoClock.getAsLong();
    }

    /** How many rows to pick now; 0 for none. Called under the lock. */
    private int pickSize(Trigger trigger) {
        if (picking) {
            if (trigger == Trigger.POKE) {
                // The pick in flight may have read before the poked row committed: look again after it.
                pokedWhilePicking = true;
            }
            return 0;
        }
        int size = Demand.pickSize(trigger, held.runs(), held.bufferedOrReserved(), options.claimCeiling(),
                options.minDemand(), lastPickEmpty);
        if (trigger == Trigger.POKE && size == 0) {
            counters.pokesDropped.incrementAndGet();
        }
        return size;
    }

    private void pick(int limit, Trigger trigger, Sinks.Empty<Void> done) {
        PickTrigger reason = trigger.counted();
        if (reason != null) {
            counters.picksBy(reason).incrementAndGet();
        }
        long sentAt = now();
        picker.pick(limit)
                .flatMap(picked -> onPicked(picked, limit, trigger, sentAt))
                .onErrorResume(error -> {
                    synchronized (this) {
                        picking = false;
                        pokedWhilePicking = false;
                    }
                    log.warn("queue {}: pick failed, the poll will try again: {}", queue(), error.toString());
                    return Mono.empty();
                })
                .doFinally(signal -> done.tryEmitEmpty())
                .subscribe(null, error -> log.error("queue {}: pick failed", queue(), error));
    }

    /** Buffers what a pick claimed and decides what comes next; emits the release of rows not kept. */
    private Mono<Void> onPicked(Picker.Picked picked, int limit, Trigger trigger, long sentAt) {
        List<ClaimedRow> rows = picked.rows();
        telemetry.picked(queue(), trigger, rows);
        List<ClaimedRow> giveBack;
        boolean repick;
        boolean shut;
        synchronized (this) {
            picking = false;
            counters.picked.addAndGet(rows.size());
            lastPickEmpty = rows.isEmpty() && picked.refused() == 0;
            shut = closed;
            if (shut) {
                giveBack = rows;
                rows = List.of();
            } else {
                // A row whose earlier run here is still going (its lease was lost, the reaper gave
                // it back and this worker claimed it again) goes straight back: two runs of one row
                // under one worker would share its bookkeeping, and the old run's commit now finds
                // it runnable and is dropped as stale.
                giveBack = rows.stream().filter(row -> held.isRunning(row.id())).toList();
                if (!giveBack.isEmpty()) {
                    rows = rows.stream().filter(row -> !held.isRunning(row.id())).toList();
                }
            }
            boolean idle = held.idle();
            if (!rows.isEmpty() || !idle) {
                currentPoll = options.pollInterval();
            } else if (trigger == Trigger.POLL) {
                Duration doubled = currentPoll.multipliedBy(2);
                currentPoll = doubled.compareTo(options.maxPollInterval()) > 0 ? options.maxPollInterval() : doubled;
            }
            // The claim returns rows in no set order: restore urgency order for the buffer.
            List<ClaimedRow> sorted = new ArrayList<>(rows);
            sorted.sort(Comparator.comparingInt(ClaimedRow::priority)
                    .thenComparingLong(ClaimedRow::eligibleMicros).thenComparingLong(ClaimedRow::id));
            counters.leasesLost.addAndGet(held.buffer(sorted, sentAt));
            repick = pokedWhilePicking && rows.isEmpty();
            pokedWhilePicking = false;
        }
        if (shut) {
            return releaser.release(giveBack);
        }
        if (!giveBack.isEmpty()) {
            releaser.release(giveBack).subscribe(null, error -> log.warn("queue {}: release failed", queue(), error));
        }
        // A pick that had rows refused looks again at once: their limits are skipped now, so
        // unrelated rows behind them are reached.
        dispatch(rows.size() + picked.refused() == limit ? Trigger.PICKED_FULL
                : repick ? Trigger.POKE : Trigger.PICKED);
        return Mono.empty();
    }

    // ---- Runs --------------------------------------------------------------------------------

    private Mono<Void> run(ClaimedRow row) {
        HeldRows.Running run = held.runOf(row);
        Cancellation cancellation = run != null ? run.cancellation : Cancellation.NEVER;
        return runner.run(row, cancellation, () -> run != null && run.lost, () -> committing(run))
                .doOnNext(result -> {
                    if (result == Executor.RunResult.STALE) {
                        counters.stale.incrementAndGet();
                    }
                })
                .onErrorResume(error -> {
                    log.error("queue {}: run of instance {} failed unexpectedly", queue(), row.id(), error);
                    return Mono.empty();
                })
                .then()
                .then(Mono.fromRunnable(() -> finished(row)));
    }

    /**
     * The run's handler has finished and its outcome waits for its commit: its slot goes to the next
     * row. Called on the run's own path, so a failure to hand the slot on is logged here, never the
     * run's: the next dispatch serves the buffer.
     */
    private void committing(HeldRows.@Nullable Running run) {
        try {
            if (run != null && held.markCommitting(run)) {
                dispatch(Trigger.COMMITTING);
            }
        } catch (RuntimeException e) {
            log.error("queue {}: handing a finished run's slot on failed", queue(), e);
        }
    }

    private void finished(ClaimedRow row) {
        held.finished(row);
        counters.completed.incrementAndGet();
        boolean empty;
        synchronized (this) {
            empty = closed && held.runs() == 0;
        }
        if (empty) {
            drained.tryEmitEmpty();
        }
        dispatch(Trigger.DEMAND);
    }

    /** Runs a row taken from the buffer, unless a close has given up on the runs (then it goes back). */
    private void start(ClaimedRow row) {
        RunSubscriber run = new RunSubscriber();
        runs.add(run);
        if (runsDisposed) {
            runs.remove(run);
            held.finished(row);
            releaser.release(List.of(row))
                    .subscribe(null, error -> log.warn("queue {}: release failed", queue(), error));
            return;
        }
        run(row).subscribe(run);
    }

    /** One run's subscriber: leaves the runs going when its run ends or is disposed. */
    private final class RunSubscriber extends BaseSubscriber<Void> {
        @Override
        protected void hookOnError(Throwable error) {
            log.error("queue {}: a run failed unexpectedly", queue(), error);
        }

        @Override
        protected void hookFinally(SignalType type) {
            runs.remove(this);
        }
    }

    // ---- Close -------------------------------------------------------------------------------

    /**
     * Graceful shutdown: stop claiming, give buffered rows back at once (after the pick in flight,
     * within {@link #CLOSE_STEP}), wait up to the drain timeout for running ones (still heartbeated
     * meanwhile), then cancel what is left, whose leases the reaper recovers. Ends within the longer
     * of the two bounds, whatever the database does. Idempotent.
     */
    public Mono<Void> close() {
        List<ClaimedRow> buffered;
        boolean idle;
        Mono<Void> pickInFlight;
        Mono<Void> closed;
        synchronized (this) {
            if (closing != null) {
                return closing;
            }
            this.closed = true;
            buffered = held.clearBuffer();
            idle = held.runs() == 0;
            pickInFlight = currentPick;
            Mono<Void> giveBack = Mono.defer(() -> {
                        loops.stopClaiming();
                        return pickInFlight.then(releaser.release(buffered));
                    })
                    .timeout(CLOSE_STEP, Mono.fromRunnable(() -> log.warn("queue {}: buffered rows not given back"
                            + " within {}; their leases will expire", queue(), CLOSE_STEP)), timer);
            Mono<Void> drain = drained.asMono().timeout(options.drainTimeout(), Mono.fromRunnable(() -> {
                counters.drainAbandoned.addAndGet(held.runs());
                log.warn("queue {}: {} runs still going after the drain timeout; their leases will expire",
                        queue(), held.runs());
            }), timer);
            closed = Mono.when(giveBack, drain)
                    .doFinally(signal -> {
                        loops.stop();
                        runsDisposed = true;
                        runs.forEach(RunSubscriber::dispose);
                    })
                    .cache();
            closing = closed;
        }
        if (idle) {
            drained.tryEmitEmpty();
        }
        return closed;
    }
}
