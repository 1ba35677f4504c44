package dev.durable.internal.engine;

import dev.durable.QueueOptions;
import dev.durable.internal.Errors;
import dev.durable.internal.engine.Demand.Trigger;
import dev.durable.internal.sql.InstanceStore;
import dev.durable.internal.sql.Rows.ClaimedRow;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * One queue's scheduler on one engine: claims rows with a lease into a small buffer and runs at
 * most {@code concurrency} of them.
 *
 * <p>The shape: claimed rows flow out of a {@link Flux#create} source into
 * {@code flatMap(run, concurrency)}. flatMap's demand is the number of free run slots; the source
 * adds {@code prefetch} to it, takes away what it already buffers, and picks when the result
 * reaches {@code minDemand} (or at once when fully idle). A finished run makes flatMap ask for one
 * more, which the source serves from the buffer with no round trip, picking only once the buffer
 * is empty. The idle poll, the heartbeat and the pokes are streams that call into the same
 * decision, which is made under this object's lock and never does I/O there.
 */
public final class QueueScheduler {

    private static final Logger log = Loggers.getLogger(QueueScheduler.class);
    private static final int RECLAIM_LIMIT = 10_000;

    private final QueueOptions options;
    private final InstanceStore store;
    private final Executor executor;
    private final Flux<String> pokes;
    private final String prefix;
    private final String worker;
    private final long leaseMillis;
    private final Duration heartbeatInterval;
    private final Duration pokeWindow;
    private final int pickRetries;
    private final Telemetry telemetry;
    private final SchedulerStats stats = new SchedulerStats();

    // Guarded by this.
    private final ArrayDeque<ClaimedRow> buffer = new ArrayDeque<>();
    private long requested;
    private boolean picking;
    private boolean pokedWhilePicking;
    private boolean closed;
    /** Slots promised to rows being inserted claimed by this scheduler (claim-on-insert). */
    private int reserved;
    /** The last pick found nothing: the queue looked empty to this scheduler. */
    private boolean lastPickEmpty;
    private Duration currentPoll;
    private Mono<Void> currentPick = Mono.empty();
    private @Nullable FluxSink<ClaimedRow> sink;

    /** Rows handed to a run and not yet finished, by id; read by the heartbeat. */
    private final Map<Long, ClaimedRow> running = new ConcurrentHashMap<>();
    private final Sinks.Empty<Void> drained = Sinks.empty();
    /** The poll and poke loops: they stop first on close. */
    private final Disposable.Composite loops = Disposables.composite();
    /** The heartbeat goes on through the drain, so running rows keep their leases. */
    private final Disposable.Swap heartbeatLoop = Disposables.swap();
    private @Nullable Disposable runs;
    private @Nullable Mono<Void> closing;

    public QueueScheduler(QueueOptions options, InstanceStore store, Executor executor, Flux<String> pokes,
            WorkerIdentity identity, Duration leaseTtl, Duration heartbeatInterval, Duration pokeWindow,
            int pickRetries, Telemetry telemetry) {
        this.options = options;
        this.store = store;
        this.executor = executor;
        this.pokes = pokes;
        this.prefix = identity.prefix(options.name());
        this.worker = identity.worker(options.name());
        this.leaseMillis = leaseTtl.toMillis();
        this.heartbeatInterval = heartbeatInterval;
        this.pokeWindow = pokeWindow;
        this.pickRetries = pickRetries;
        this.currentPoll = options.pollInterval();
        this.telemetry = telemetry;
        telemetry.register(this, options.concurrency(), options.prefetch());
    }

    public String queue() {
        return options.name();
    }

    public String worker() {
        return worker;
    }

    public SchedulerStats stats() {
        return stats;
    }

    /** Rows handed to runs and not finished. */
    public int running() {
        return running.size();
    }

    /** Rows claimed and waiting for a free run slot. */
    public synchronized int buffered() {
        return buffer.size();
    }

    /** Running rows plus buffered rows. */
    public synchronized int held() {
        return running.size() + buffer.size();
    }

    /**
     * Claim-on-insert: reserves up to {@code wanted} slots for rows about to be inserted already
     * claimed by this scheduler's worker, saving an idle queue the pick's round trip. Only a fully
     * idle scheduler whose last pick found nothing reserves: it believes the queue empty, so taking
     * new rows first passes over no older, more urgent row. Returns how many slots it reserved.
     */
    public synchronized int reserve(int wanted) {
        if (closed || picking || sink == null || reserved > 0 || !lastPickEmpty
                || !running.isEmpty() || !buffer.isEmpty()) {
            return 0;
        }
        reserved = Math.min(wanted, options.claimCeiling());
        return reserved;
    }

    /** The rows inserted claimed under a reservation of {@code slots}: into the buffer they go. */
    public void claimedOnInsert(int slots, List<ClaimedRow> rows) {
        telemetry.picked(queue(), Trigger.INSERT, rows);
        synchronized (this) {
            reserved -= slots;
            stats.picksBy(Trigger.INSERT).incrementAndGet();
            stats.picked.addAndGet(rows.size());
            lastPickEmpty = false;
            currentPoll = options.pollInterval();
            if (!closed) {
                buffer.addAll(rows);
                rows = List.of();
            }
        }
        if (rows.isEmpty()) {
            dispatch(Trigger.INSERT);
        } else {
            release(rows).subscribe(null, error -> log.warn("queue {}: release failed", queue(), error));
        }
    }

    /** The insert under a reservation failed: the slots are free again. */
    public synchronized void cancelReservation(int slots) {
        reserved -= slots;
    }

    /** The idle poll interval now in force (grows while idle, snaps back on work). */
    public synchronized Duration currentPoll() {
        return currentPoll;
    }

    /**
     * Reclaims the stale claims of this scheduler's dead predecessors (same identity prefix, older
     * incarnation) at once, then starts claiming. The margin spares any claim beaten within the
     * last two heartbeats, so a live owner that happens to share the prefix keeps its rows.
     */
    public Mono<Void> start() {
        long margin = Math.max(leaseMillis - 2 * heartbeatInterval.toMillis(), 0);
        return store.recoverExpired(margin, prefix, worker, RECLAIM_LIMIT)
                .count()
                .doOnNext(reclaimed -> {
                    if (reclaimed > 0) {
                        stats.reclaimed.addAndGet(reclaimed);
                        log.info("queue {}: reclaimed {} rows of a dead predecessor of {}", queue(), reclaimed, prefix);
                    }
                })
                .then(Mono.fromRunnable(this::launch));
    }

    private void launch() {
        Flux<ClaimedRow> claims = Flux.create(emitter -> {
            synchronized (this) {
                sink = emitter;
            }
            emitter.onRequest(this::onRequest);
        }, FluxSink.OverflowStrategy.BUFFER);
        runs = claims.flatMap(this::run, options.concurrency(), 1)
                .subscribe(null, error -> log.error("queue {}: run pipeline failed", queue(), error));

        loops.add(Flux.defer(() -> Mono.delay(currentPoll())).repeat()
                .subscribe(tick -> dispatch(Trigger.POLL),
                        error -> log.error("queue {}: poll loop failed", queue(), error)));
        // Leading edge: the first poke goes straight through; pokes that come during the window
        // after it collapse into the latest one, handled when the window ends.
        loops.add(pokes.filter(queue()::equals)
                .onBackpressureLatest()
                .concatMap(poked -> {
                    stats.pokes.incrementAndGet();
                    dispatch(Trigger.POKE);
                    return Mono.delay(pokeWindow);
                }, 0)
                .subscribe(null, error -> log.error("queue {}: poke loop failed", queue(), error)));
        heartbeatLoop.update(Flux.interval(heartbeatInterval)
                .onBackpressureDrop(tick -> stats.heartbeatsSkipped.incrementAndGet())
                .concatMap(tick -> heartbeat(), 0)
                .subscribe(null, error -> log.error("queue {}: heartbeat loop failed", queue(), error)));
    }

    private void onRequest(long n) {
        synchronized (this) {
            requested = Operators.addCap(requested, n);
        }
        dispatch(Trigger.DEMAND);
    }

    /** Hands buffered rows to free slots and decides whether to pick; the I/O runs after the lock. */
    private void dispatch(Trigger trigger) {
        List<ClaimedRow> toRun = List.of();
        FluxSink<ClaimedRow> emitter;
        int pickSize;
        synchronized (this) {
            if (closed) {
                return;
            }
            emitter = sink;
            if (emitter != null && requested > 0 && !buffer.isEmpty()) {
                toRun = new ArrayList<>();
                while (requested > 0 && !buffer.isEmpty()) {
                    ClaimedRow row = buffer.poll();
                    running.put(row.id(), row);
                    toRun.add(row);
                    requested--;
                }
            }
            pickSize = pickSize(trigger);
            if (pickSize > 0) {
                picking = true;
            }
        }
        for (ClaimedRow row : toRun) {
            emitter.next(row);
        }
        if (pickSize > 0) {
            pick(pickSize, trigger);
        }
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
        int size = Demand.pickSize(trigger, running.size(), buffer.size() + reserved, options.claimCeiling(),
                options.minDemand());
        if (trigger == Trigger.POKE && size == 0) {
            stats.pokesDropped.incrementAndGet();
        }
        return size;
    }

    private void pick(int limit, Trigger trigger) {
        stats.picks.incrementAndGet();
        stats.picksBy(trigger).incrementAndGet();
        Mono<Void> pick = store.pick(queue(), limit, worker, leaseMillis)
                .collectList()
                .retryWhen(Retry.max(pickRetries).filter(Errors::isExecutingKeyTaken)
                        .doBeforeRetry(retry -> stats.pickRetries.incrementAndGet()))
                .flatMap(rows -> onPicked(rows, limit, trigger))
                .onErrorResume(error -> {
                    synchronized (this) {
                        picking = false;
                    }
                    stats.pickFailures.incrementAndGet();
                    log.warn("queue {}: pick failed, the poll will try again: {}", queue(), error.toString());
                    return Mono.empty();
                })
                .cache();
        synchronized (this) {
            currentPick = pick;
        }
        pick.subscribe(null, error -> log.error("queue {}: pick failed", queue(), error));
    }

    private Mono<Void> onPicked(List<ClaimedRow> rows, int limit, Trigger trigger) {
        boolean repick;
        telemetry.picked(queue(), trigger, rows);
        synchronized (this) {
            picking = false;
            stats.picked.addAndGet(rows.size());
            lastPickEmpty = rows.isEmpty();
            boolean idle = running.isEmpty() && buffer.isEmpty();
            if (closed) {
                return release(rows);
            }
            if (!rows.isEmpty() || !idle) {
                currentPoll = options.pollInterval();
            } else if (trigger == Trigger.POLL) {
                Duration doubled = currentPoll.multipliedBy(2);
                currentPoll = doubled.compareTo(options.maxPollInterval()) > 0 ? options.maxPollInterval() : doubled;
            }
            // The claim UPDATE returns rows in no set order: restore urgency order for the buffer.
            List<ClaimedRow> sorted = new ArrayList<>(rows);
            sorted.sort(Comparator.comparingInt(ClaimedRow::priority)
                    .thenComparingLong(ClaimedRow::eligibleMicros).thenComparingLong(ClaimedRow::id));
            buffer.addAll(sorted);
            repick = pokedWhilePicking && rows.isEmpty();
            pokedWhilePicking = false;
        }
        dispatch(rows.size() == limit ? Trigger.PICKED_FULL : repick ? Trigger.POKE : Trigger.PICKED);
        return Mono.empty();
    }

    private Mono<Void> run(ClaimedRow row) {
        return executor.run(row, worker)
                .doOnNext(result -> {
                    if (result == Executor.RunResult.STALE) {
                        stats.stale.incrementAndGet();
                    }
                })
                .onErrorResume(error -> {
                    log.error("queue {}: run of instance {} failed unexpectedly", queue(), row.id(), error);
                    return Mono.empty();
                })
                .then()
                // Before the run's completion reaches flatMap, so its next request sees the free slot.
                .then(Mono.fromRunnable(() -> finished(row)));
    }

    private void finished(ClaimedRow row) {
        running.remove(row.id());
        stats.completed.incrementAndGet();
        boolean empty;
        synchronized (this) {
            empty = closed && running.isEmpty();
        }
        if (empty) {
            drained.tryEmitEmpty();
        }
    }

    private Mono<Void> heartbeat() {
        List<Long> ids;
        synchronized (this) {
            ids = new ArrayList<>(running.size() + buffer.size());
            ids.addAll(running.keySet());
            for (ClaimedRow row : buffer) {
                ids.add(row.id());
            }
        }
        if (ids.isEmpty()) {
            return Mono.empty();
        }
        stats.heartbeats.incrementAndGet();
        return store.heartbeat(ids, worker, leaseMillis)
                .doOnNext(renewed -> {
                    if (renewed < ids.size()) {
                        log.debug("queue {}: {} of {} held rows no longer owned", queue(), ids.size() - renewed, ids.size());
                    }
                })
                .onErrorResume(error -> {
                    log.warn("queue {}: heartbeat failed: {}", queue(), error.toString());
                    return Mono.empty();
                })
                .then();
    }

    private Mono<Void> release(List<ClaimedRow> rows) {
        if (rows.isEmpty()) {
            return Mono.empty();
        }
        List<Long> ids = rows.stream().map(ClaimedRow::id).toList();
        return store.release(ids, worker)
                .count()
                .doOnNext(released -> stats.released.addAndGet(released))
                .onErrorResume(error -> {
                    log.warn("queue {}: release of {} buffered rows failed, the reaper returns them: {}",
                            queue(), ids.size(), error.toString());
                    return Mono.empty();
                })
                .then();
    }

    /**
     * Graceful shutdown: stop claiming, give buffered rows back at once, wait up to the drain
     * timeout for running ones (still heartbeated meanwhile), then cancel what is left, whose
     * leases the reaper recovers. Idempotent.
     */
    public synchronized Mono<Void> close() {
        if (closing != null) {
            return closing;
        }
        closed = true;
        List<ClaimedRow> buffered = new ArrayList<>(buffer);
        buffer.clear();
        boolean idle = running.isEmpty();
        Mono<Void> pickInFlight = currentPick;
        if (idle) {
            drained.tryEmitEmpty();
        }
        closing = Mono.defer(() -> {
                    loops.dispose();
                    return pickInFlight.then(release(buffered));
                })
                .then(drained.asMono().timeout(options.drainTimeout(), Mono.fromRunnable(() -> {
                    stats.drainTimedOut.addAndGet(running.size());
                    log.warn("queue {}: {} runs still going after the drain timeout; their leases will expire",
                            queue(), running.size());
                })))
                .doFinally(signal -> {
                    loops.dispose();
                    heartbeatLoop.dispose();
                    if (runs != null) {
                        runs.dispose();
                    }
                })
                .cache();
        return closing;
    }

    /** Counters of what this scheduler did; read by tests and by metrics. */
    public static final class SchedulerStats {
        public final AtomicLong picks = new AtomicLong();
        public final AtomicLong picked = new AtomicLong();
        public final AtomicLong pickRetries = new AtomicLong();
        public final AtomicLong pickFailures = new AtomicLong();
        public final AtomicLong pokes = new AtomicLong();
        public final AtomicLong pokesDropped = new AtomicLong();
        public final AtomicLong heartbeats = new AtomicLong();
        public final AtomicLong heartbeatsSkipped = new AtomicLong();
        public final AtomicLong completed = new AtomicLong();
        public final AtomicLong stale = new AtomicLong();
        public final AtomicLong reclaimed = new AtomicLong();
        public final AtomicLong released = new AtomicLong();
        public final AtomicLong drainTimedOut = new AtomicLong();
        public final AtomicLong throttled = new AtomicLong();
        private final java.util.EnumMap<Trigger, AtomicLong> picksByTrigger = new java.util.EnumMap<>(Trigger.class);

        SchedulerStats() {
            for (Trigger trigger : Trigger.values()) {
                picksByTrigger.put(trigger, new AtomicLong());
            }
        }

        /** Picks made for one reason (poll, poke, demand, a full pick). */
        public AtomicLong picksBy(Trigger trigger) {
            return picksByTrigger.get(trigger);
        }
    }
}
