package dev.durable.internal.engine;

import dev.durable.QueueOptions;
import dev.durable.internal.Errors;
import dev.durable.internal.engine.Demand.Trigger;
import dev.durable.internal.sql.InstanceStore;
import dev.durable.internal.sql.Rows;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
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
    /**
     * How long a limit the limiter refused is skipped by this scheduler's picks: long enough that a
     * saturated limit is not asked about in a hot loop, short enough that a freed slot is soon used.
     */
    static final long REFUSED_HOLD_MILLIS = 50;
    private static final String SEP = String.valueOf((char) 31);

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
    private final Limiter limiter;
    /** The limiter admits after the pick (not inside it): ask it, hold and renew slots, credit them. */
    private final boolean admitsAfterPick;
    private final SchedulerStats stats = new SchedulerStats();
    /** The gate slots held by admitted rows (buffered or running), by row id; renewed by the heartbeat. */
    private final Map<Long, LimitClaim> slots = new ConcurrentHashMap<>();
    /** Limits the limiter refused lately (gate/key/shard, rate/partition), to the nanoTime they are skipped until. */
    private final Map<String, Long> refusedGates = new ConcurrentHashMap<>();
    private final Map<String, Long> refusedRates = new ConcurrentHashMap<>();
    private final AtomicLong claimSequence = new AtomicLong();

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
    private Sinks.Empty<Void> pickDone = Sinks.empty();
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
            int pickRetries, Telemetry telemetry, Limiter limiter) {
        this.options = options;
        this.limiter = limiter;
        this.admitsAfterPick = !limiter.admitsInPick();
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
                // Set with the flag, so a close() from now on waits for this pick.
                Sinks.Empty<Void> done = Sinks.empty();
                pickDone = done;
                currentPick = done.asMono();
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
        Sinks.Empty<Void> done;
        synchronized (this) {
            done = pickDone;
        }
        stats.picks.incrementAndGet();
        stats.picksBy(trigger).incrementAndGet();
        Mono<Admitted> claimed = admitsAfterPick ? pickAdmitting(limit)
                : store.pick(queue(), limit, worker, leaseMillis).collectList().map(rows -> new Admitted(rows, 0));
        Mono<Void> pick = claimed
                .retryWhen(Retry.max(pickRetries).filter(error -> Errors.isExecutingKeyTaken(error) || Errors.isDeadlock(error))
                        .doBeforeRetry(retry -> stats.pickRetries.incrementAndGet()))
                .flatMap(admitted -> onPicked(admitted.rows(), admitted.refused(), limit, trigger))
                .onErrorResume(error -> {
                    synchronized (this) {
                        picking = false;
                        pokedWhilePicking = false;
                    }
                    stats.pickFailures.incrementAndGet();
                    log.warn("queue {}: pick failed, the poll will try again: {}", queue(), error.toString());
                    return Mono.empty();
                })
                .doFinally(signal -> done.tryEmitEmpty());
        pick.subscribe(null, error -> log.error("queue {}: pick failed", queue(), error));
    }

    /**
     * The pick when the limiter is not in the database: in one transaction, locks the candidates,
     * asks the limiter about the limited ones while holding the locks, and claims only what it
     * admitted (with the unlimited rows). A refused row is never claimed, so it loses no attempt and
     * the database never shows it executing; its limit is skipped by this scheduler's picks for
     * {@link #REFUSED_HOLD_MILLIS}, so the next pick reaches unrelated rows behind it. An unreachable
     * limiter admits nothing limited: unlimited rows still run, limited ones wait in the queue.
     */
    private Mono<Admitted> pickAdmitting(int limit) {
        return Mono.defer(() -> {
            Map<Long, LimitClaim> asked = new ConcurrentHashMap<>();
            Set<Long> admittedIds = ConcurrentHashMap.newKeySet();
            int[] refused = new int[1];
            return store.pickAdmitting(queue(), limit, worker, leaseMillis, stillRefused(refusedGates),
                            stillRefused(refusedRates), candidates -> {
                                List<LimitClaim> claims = new ArrayList<>(candidates.size());
                                for (Rows.Candidate candidate : candidates) {
                                    LimitClaim claim = claimOf(candidate);
                                    claims.add(claim);
                                    asked.put(candidate.id(), claim);
                                }
                                return limiter.admit(claims)
                                        .onErrorResume(error -> {
                                            log.debug("queue {}: limiter unavailable, {} limited rows wait: {}",
                                                    queue(), claims.size(), error.toString());
                                            // Its answer may have been lost after it took slots: give back any.
                                            credit(claims);
                                            return Mono.just(Set.of());
                                        })
                                        .doOnNext(admitted -> {
                                            admittedIds.addAll(admitted);
                                            refused[0] = refuse(claims, admitted);
                                        });
                            })
                    .collectList()
                    .map(rows -> {
                        for (ClaimedRow row : rows) {
                            LimitClaim claim = asked.remove(row.id());
                            if (claim != null && claim.holdsSlot()) {
                                slots.put(row.id(), claim);
                            }
                        }
                        // Admitted but not claimed (cannot happen under the lock, but a slot must never leak).
                        credit(asked.values().stream().filter(claim -> admittedIds.contains(claim.id())).toList());
                        return new Admitted(rows, refused[0]);
                    })
                    .doOnError(error -> {
                        // The transaction rolled back after the limiter admitted: the slots go back.
                        credit(asked.values().stream().filter(claim -> admittedIds.contains(claim.id())).toList());
                    });
        });
    }

    /** Notes the limits of refused claims, to be skipped for a while; returns how many were refused. */
    private int refuse(List<LimitClaim> claims, Set<Long> admitted) {
        long until = System.nanoTime() + REFUSED_HOLD_MILLIS * 1_000_000;
        int refused = 0;
        for (LimitClaim claim : claims) {
            if (admitted.contains(claim.id())) {
                continue;
            }
            refused++;
            if (claim.gate() != null) {
                refusedGates.put(gateKey(claim), until);
            }
            if (claim.rateLimit() != null) {
                refusedRates.put(claim.rateLimit() + SEP + claim.ratePartition(), until);
            }
        }
        stats.throttled.addAndGet(refused);
        return refused;
    }

    /** The rows a pick claimed, and how many limited rows the limiter refused. */
    private record Admitted(List<ClaimedRow> rows, int refused) {
    }

    /** A candidate's limits; the holder is unique per claim (worker, row, a per-scheduler sequence). */
    private LimitClaim claimOf(Rows.Candidate candidate) {
        return new LimitClaim(candidate.id(), worker + SEP + candidate.id() + SEP + claimSequence.incrementAndGet(),
                candidate.gateName(), candidate.gateName() == null ? null : candidate.concurrencyKey(),
                candidate.gateShard(), candidate.rateLimit(),
                candidate.ratePartition() == null ? "" : candidate.ratePartition(), candidate.rateWeight());
    }

    private static String gateKey(LimitClaim claim) {
        return claim.gate() + SEP + claim.key() + SEP + claim.shard();
    }

    /** The limits still refused, as the pick's skip list; forgets the ones whose hold ended. */
    private static String[] stillRefused(Map<String, Long> refused) {
        if (refused.isEmpty()) {
            return new String[0];
        }
        long now = System.nanoTime();
        refused.values().removeIf(until -> until - now <= 0);
        return refused.keySet().toArray(String[]::new);
    }

    /** Gives back gate slots, fire and forget: a slot not credited expires by itself. */
    private void credit(List<LimitClaim> claims) {
        List<LimitClaim> held = claims.stream().filter(LimitClaim::holdsSlot).toList();
        if (held.isEmpty()) {
            return;
        }
        for (LimitClaim claim : held) {
            // A slot of ours came free: this scheduler may use it at once.
            refusedGates.remove(gateKey(claim));
        }
        limiter.credit(held).subscribe(null,
                error -> log.debug("queue {}: credit failed, the slots expire by themselves: {}", queue(), error.toString()));
    }

    /**
     * An inline step is about to run on the claim: when it left its gate (a new or released key), the
     * slot it held is given back; the heartbeat then renews only what the row still holds.
     */
    private void swapSlot(long id, ClaimedRow continued) {
        LimitClaim held = slots.get(id);
        if (held != null && (continued.gateName() == null || !Objects.equals(held.gate(), continued.gateName())
                || !Objects.equals(held.key(), continued.concurrencyKey()))) {
            // A gate change is never inline (it goes through the pick), so the new step holds no slot.
            slots.remove(id);
            credit(List.of(held));
        }
    }

    private Mono<Void> onPicked(List<ClaimedRow> rows, int refused, int limit, Trigger trigger) {
        boolean repick;
        telemetry.picked(queue(), trigger, rows);
        synchronized (this) {
            picking = false;
            stats.picked.addAndGet(rows.size());
            lastPickEmpty = rows.isEmpty() && refused == 0;
            boolean idle = running.isEmpty() && buffer.isEmpty();
            if (closed) {
                return release(rows);
            }
            // A row whose earlier run here is still going (its lease was lost, the reaper gave it
            // back and this worker claimed it again) goes straight back: two runs of one row under
            // one worker would share its bookkeeping, and the old run's commit now finds it
            // runnable and is dropped as stale.
            List<ClaimedRow> again = rows.stream().filter(row -> running.containsKey(row.id())).toList();
            if (!again.isEmpty()) {
                rows = rows.stream().filter(row -> !running.containsKey(row.id())).toList();
                release(again).subscribe(null, error -> log.warn("queue {}: release failed", queue(), error));
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
        // A pick that had rows refused looks again at once: their limits are skipped now, so
        // unrelated rows behind them are reached.
        dispatch(rows.size() + refused == limit ? Trigger.PICKED_FULL : repick ? Trigger.POKE : Trigger.PICKED);
        return Mono.empty();
    }

    private Mono<Void> run(ClaimedRow row) {
        return executor.run(row, worker, continued -> swapSlot(row.id(), continued))
                .doOnNext(result -> {
                    if (result == Executor.RunResult.STALE) {
                        stats.stale.incrementAndGet();
                    }
                    LimitClaim held = slots.remove(row.id());
                    // An outcome that did not commit leaves the row executing until its lease expires:
                    // its slot, no longer renewed, expires with it, so the gate never over-admits.
                    if (held != null && result != Executor.RunResult.NOT_COMMITTED) {
                        credit(List.of(held));
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
        running.remove(row.id(), row);
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
        Mono<Void> renewSlots = !admitsAfterPick || slots.isEmpty() ? Mono.empty()
                : limiter.renew(List.copyOf(slots.values()))
                        .doOnNext(missing -> {
                            if (missing > 0) {
                                log.debug("queue {}: {} gate slots were lost and taken again", queue(), missing);
                            }
                        })
                        .onErrorResume(error -> {
                            log.debug("queue {}: slot renewal failed: {}", queue(), error.toString());
                            return Mono.empty();
                        })
                        .then();
        Mono<Void> beat = store.heartbeat(ids, worker, leaseMillis)
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
        return Mono.when(beat, renewSlots);
    }

    /** Gives claimed, unstarted rows back, then their slots. */
    private Mono<Void> release(List<ClaimedRow> rows) {
        if (rows.isEmpty()) {
            return Mono.empty();
        }
        List<Long> ids = rows.stream().map(ClaimedRow::id).toList();
        // No longer renewed from here: credited once the rows are back, else they expire with the leases.
        List<LimitClaim> held = new ArrayList<>();
        for (Long id : ids) {
            LimitClaim claim = slots.remove(id);
            if (claim != null) {
                held.add(claim);
            }
        }
        return store.release(ids, worker)
                .count()
                .doOnNext(released -> {
                    stats.released.addAndGet(released);
                    credit(held);
                })
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
