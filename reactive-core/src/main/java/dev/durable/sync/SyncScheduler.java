package dev.durable.sync;

import dev.durable.sync.SyncConfigException.Rule;
import dev.durable.sync.internal.PartnerBackoff;
import dev.durable.sync.internal.SyncMeters;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * Periodic anti-entropy for a replicated, sharded store: every tick, one pull per (partner, shard),
 * partner-major then shard order, through the injected {@link SyncPullTrigger}. It owns timing and
 * target selection only and holds no shard handles, so it never serialises the store's writes.
 *
 * <ul>
 *   <li><b>Timing.</b> The first tick comes one interval after {@link #start()}; the next is armed
 *       when a pass ends, so passes never stack. With jitter each delay is shortened at random.
 *   <li><b>Never overlap.</b> A tick that comes while a pass is running (an explicit
 *       {@link #runOnce()}) is skipped, and a {@code runOnce} during a pass joins that pass; both are
 *       counted in {@code durable.sync.skipped}.
 *   <li><b>Failures.</b> A failing pull is reported with its partner and shard
 *       ({@link SyncStats#failures()}, a warning, {@code durable.sync.pulls{outcome=failure}}) and
 *       stops neither the other pulls of its pass nor the next tick. A partner whose every pull
 *       failed sits out a growing number of ticks.
 *   <li><b>Pacing.</b> At most {@code maxConcurrencyPerPartner} pulls per partner and
 *       {@code maxConcurrency} in all are in flight.
 *   <li><b>Supervision.</b> If the tick loop itself crashes it is restarted (counted in
 *       {@code durable.sync.restarts}), its next tick one interval later.
 *   <li><b>Membership.</b> A static node set, or the latest set of a membership {@code Flux}.
 * </ul>
 *
 * Nothing here blocks: the loop runs on the configured {@link Scheduler}.
 */
public final class SyncScheduler {

    private static final Logger log = Loggers.getLogger(SyncScheduler.class);
    private static final String TICK = "tick";
    private static final String MANUAL = "manual";

    private final SyncSchedulerConfig config;
    private final SyncPullTrigger trigger;
    private final Scheduler scheduler;
    private final SyncMeters meters;
    private final PartnerBackoff backoff;
    private final Sinks.Many<SyncStats> passes = Sinks.many().multicast().directBestEffort();
    /** The latest membership set, sorted; null until the first arrives (or with a static set). */
    private final AtomicReference<@Nullable List<String>> members = new AtomicReference<>();
    /** Ticks so far: the round of gossip topologies and the clock of partner backoff. */
    private final AtomicLong ticks = new AtomicLong();
    private final AtomicLong restarts = new AtomicLong();
    /** Guards {@link #running} and {@link #closed}: held only to check and swap, never across work. */
    private final Object lock = new Object();
    private @Nullable RunningPass running;
    private volatile boolean closed;
    private final AtomicBoolean started = new AtomicBoolean();
    private final AtomicBoolean membershipSubscribed = new AtomicBoolean();
    // Swaps: a subscription stored after shutdown disposed them is disposed at once.
    private final Disposable.Swap loop = Disposables.swap();
    private final Disposable.Swap membership = Disposables.swap();
    /** A crash to raise at the next tick: the test seam for supervision. */
    private volatile @Nullable RuntimeException crash;

    private SyncScheduler(SyncSchedulerConfig config, SyncPullTrigger trigger) {
        this.config = config;
        this.trigger = trigger;
        this.scheduler = config.scheduler();
        this.meters = new SyncMeters(config.meterRegistry(), () -> scheduler.now(TimeUnit.MILLISECONDS));
        this.backoff = new PartnerBackoff(config.maxBackoffTicks());
    }

    /** A scheduler for {@code config} that pulls through {@code trigger}; call {@link #start()}. */
    public static SyncScheduler create(SyncSchedulerConfig config, SyncPullTrigger trigger) {
        if (config == null || trigger == null) {
            throw new SyncConfigException(Rule.INVALID_OPTION, "config and trigger must not be null");
        }
        return new SyncScheduler(config, trigger);
    }

    public SyncSchedulerConfig config() {
        return config;
    }

    /** Starts the tick loop (and the membership subscription). Idempotent; nothing after shutdown. */
    public void start() {
        if (closed || !started.compareAndSet(false, true)) {
            return;
        }
        subscribeMembership();
        loop.update(tickLoop().subscribe(stats -> { },
                error -> log.error("sync tick loop of node {} stopped", config.localNode(), error)));
    }

    /**
     * One pass now, outside the tick timing, over every partner (backoff does not apply: an explicit
     * request pulls from everyone). During a running pass it joins that pass. Emits the pass's
     * stats, or a {@link SyncConfigException} when the current node set is unusable (no membership
     * yet, local node not in it), or {@link SyncSchedulerClosedException} after shutdown.
     */
    public Mono<SyncStats> runOnce() {
        return Mono.defer(() -> {
            subscribeMembership();
            RunningPass pass;
            synchronized (lock) {
                if (closed) {
                    return Mono.error(new SyncSchedulerClosedException(
                            "the sync scheduler of node '" + config.localNode() + "' is shut down"));
                }
                if (running != null) {
                    meters.skipped("coalesced", 1);
                    return running.result.asMono();
                }
                pass = new RunningPass();
                running = pass;
            }
            start(pass, MANUAL, Math.max(0, ticks.get() - 1));
            return pass.result.asMono();
        });
    }

    /**
     * Stops the tick loop and the membership subscription and cancels a running pass (whose
     * waiters get {@link SyncSchedulerClosedException}). Idempotent.
     */
    public Mono<Void> shutdown() {
        return Mono.fromRunnable(() -> {
            RunningPass cut;
            synchronized (lock) {
                if (closed) {
                    return;
                }
                closed = true;
                cut = running;
                running = null;
            }
            loop.dispose();
            membership.dispose();
            if (cut != null) {
                cut.subscription.dispose();
                cut.result.tryEmitError(new SyncSchedulerClosedException("the sync scheduler of node '"
                        + config.localNode() + "' was shut down during a pass"));
            }
            passes.tryEmitComplete();
            log.debug("sync scheduler of node {} shut down", config.localNode());
        });
    }

    /**
     * The stats of each pass as it ends (ticks and {@link #runOnce()}), hot and best effort: a
     * subscriber that does not keep up misses passes, never slows the scheduler. Completes at
     * shutdown.
     */
    public Flux<SyncStats> passes() {
        return passes.asFlux();
    }

    /** When a pull of {@code shard} from {@code partner} last succeeded, by the scheduler's clock. */
    public Optional<Instant> lastSuccess(String partner, int shard) {
        Long millis = meters.lastSuccessMillis(partner, shard);
        return millis == null ? Optional.empty() : Optional.of(Instant.ofEpochMilli(millis));
    }

    /** Every (partner, shard) pulled successfully so far, with when it last was: lag is now minus that. */
    public Map<SyncTarget, Instant> lastSuccesses() {
        Map<SyncTarget, Instant> result = new LinkedHashMap<>();
        meters.lastSuccesses().forEach((partner, shards) -> shards.forEach(
                (shard, millis) -> result.put(new SyncTarget(partner, shard), Instant.ofEpochMilli(millis))));
        return result;
    }

    /** How often the tick loop crashed and was restarted. */
    public long restarts() {
        return restarts.get();
    }

    /** Ticks so far, run or skipped. */
    public long ticks() {
        return ticks.get();
    }

    /** Makes the next tick crash the loop, as a bug would: for the supervision test only. */
    void crashNextTickForTest(RuntimeException error) {
        crash = error;
    }

    // ---- The tick loop ----------------------------------------------------------------------

    /**
     * Delay, tick, repeat: the next delay starts only when the tick's pass has ended. A crash
     * escaping a tick resubscribes the whole loop (the supervisor), starting with a fresh delay, so
     * a loop that keeps crashing is paced by the interval rather than spinning.
     */
    private Flux<SyncStats> tickLoop() {
        return Mono.defer(() -> Mono.delay(nextDelay(), scheduler))
                .then(Mono.defer(this::onTick))
                .repeat()
                .retryWhen(Retry.indefinitely().doBeforeRetry(signal -> {
                    restarts.incrementAndGet();
                    meters.restarted();
                    log.warn("sync tick loop of node {} crashed; restarting it: {}", config.localNode(),
                            signal.failure().toString());
                }));
    }

    private Duration nextDelay() {
        long jitterNanos = config.jitter().toNanos();
        if (jitterNanos == 0) {
            return config.interval();
        }
        // Shorten, never lengthen: the interval stays the bound on the time between passes.
        long shortenBy = (long) (config.random().nextDouble() * jitterNanos);
        return config.interval().minusNanos(Math.min(shortenBy, config.interval().toNanos() - 1));
    }

    private Mono<SyncStats> onTick() {
        RuntimeException injected = crash;
        if (injected != null) {
            crash = null;
            return Mono.error(injected);
        }
        long round = ticks.getAndIncrement();
        meters.tick();
        RunningPass pass;
        synchronized (lock) {
            if (closed) {
                return Mono.empty();
            }
            if (running != null) {
                meters.skipped("overlap", 1);
                log.debug("sync tick {} of node {} skipped: a pass is still running", round, config.localNode());
                return Mono.empty();
            }
            pass = new RunningPass();
            running = pass;
        }
        start(pass, TICK, round);
        // A failed pass ends this tick, not the loop: the next tick tries again.
        return pass.result.asMono().onErrorResume(error -> {
            if (error instanceof SyncConfigException broken) {
                meters.skipped(broken.rule().name().toLowerCase(Locale.ROOT).replace('_', '-'), 1);
                log.debug("sync tick {} skipped: {}", round, error.getMessage());
            } else if (!(error instanceof SyncSchedulerClosedException)) {
                meters.skipped("pass-failed", 1);
                log.warn("sync tick {} of node {} failed: {}", round, config.localNode(), error.toString());
            }
            return Mono.empty();
        });
    }

    /** Runs the pass detached from whoever waits on it, so a cancelled waiter does not cut it short. */
    private void start(RunningPass pass, String kind, long round) {
        pass.subscription.update(pass(kind, round).subscribe(stats -> {
            emitPass(stats);
            release(pass);
            pass.result.tryEmitValue(stats);
        }, error -> {
            release(pass);
            pass.result.tryEmitError(error);
        }));
    }

    private void release(RunningPass pass) {
        synchronized (lock) {
            if (running == pass) {
                running = null;
            }
        }
    }

    private void emitPass(SyncStats stats) {
        Sinks.EmitResult result = passes.tryEmitNext(stats);
        // No subscriber or a slow one: best effort by design. Non-serialised would be our bug.
        if (result == Sinks.EmitResult.FAIL_NON_SERIALIZED) {
            log.warn("sync pass stats dropped: concurrent emission");
        }
    }

    // ---- One pass ---------------------------------------------------------------------------

    private Mono<SyncStats> pass(String kind, long round) {
        return Mono.defer(() -> {
            long startedNanos = scheduler.now(TimeUnit.NANOSECONDS);
            List<String> partners = partners(round);
            return shards()
                    .flatMap(shards -> pullAll(kind, round, partners, shards))
                    .doFinally(signal -> meters.pass(kind,
                            Duration.ofNanos(scheduler.now(TimeUnit.NANOSECONDS) - startedNanos)));
        });
    }

    /** The local node's partners this round, from the static set or the latest membership. */
    private List<String> partners(long round) {
        if (config.membership() == null) {
            return config.topology().partners(config.localNode(), config.nodes(), round);
        }
        List<String> latest = members.get();
        if (latest == null) {
            throw new SyncConfigException(Rule.NO_NODE_SET, "no membership set has arrived yet for node '"
                    + config.localNode() + "'");
        }
        SyncTopology topology = config.topology() instanceof SyncTopology.Custom custom
                ? custom.restrictTo(latest) : config.topology();
        return topology.partners(config.localNode(), latest, round);
    }

    private Mono<List<Integer>> shards() {
        int count = config.shardCount();
        return Flux.defer(() -> config.shardSource().shards(count))
                .collectList()
                .map(reported -> {
                    TreeSet<Integer> shards = new TreeSet<>();
                    for (Integer shard : reported) {
                        if (shard != null && shard >= 0 && shard < count) {
                            shards.add(shard);
                        } else {
                            log.warn("shard source reported shard {}, outside 0..{}; ignored", shard, count - 1);
                        }
                    }
                    return List.copyOf(shards);
                });
    }

    private Mono<SyncStats> pullAll(String kind, long round, List<String> partners, List<Integer> shards) {
        List<String> eligible = TICK.equals(kind)
                ? partners.stream().filter(partner -> !backoff.isBackedOff(partner, round)).toList()
                : partners;
        int backedOff = partners.size() - eligible.size();
        meters.skipped("backoff", backedOff);
        int perPartner = config.maxConcurrencyPerPartner();
        // Whole partners at once, each with its own width: the product never exceeds the total.
        int partnersAtOnce = Math.max(1, config.maxConcurrency() / perPartner);
        return Flux.fromIterable(eligible)
                .flatMap(partner -> Flux.fromIterable(shards)
                        .flatMap(shard -> pull(partner, shard), perPartner)
                        .collectList()
                        .doOnNext(outcomes -> afterPartner(partner, round, outcomes)), partnersAtOnce)
                .collectList()
                .map(perPartnerOutcomes -> {
                    List<SyncPullException> failures = new ArrayList<>();
                    perPartnerOutcomes.forEach(outcomes -> outcomes.forEach(outcome -> {
                        if (outcome.error() != null) {
                            failures.add(outcome.error());
                        }
                    }));
                    return new SyncStats(partners.size(), shards.size(), eligible.size() * shards.size(),
                            failures.size(), backedOff, failures);
                });
    }

    private record Outcome(String partner, int shard, @Nullable SyncPullException error) {
    }

    private Mono<Outcome> pull(String partner, int shard) {
        // defer: a trigger that throws, or returns null, is a failed pull like one that errors.
        return Mono.defer(() -> trigger.trigger(partner, shard))
                .timeout(config.pullTimeout(), scheduler)
                .then(Mono.fromCallable(() -> {
                    meters.pullSucceeded(partner, shard);
                    return new Outcome(partner, shard, null);
                }))
                .onErrorResume(error -> {
                    meters.pullFailed(partner);
                    log.debug("sync pull from {} for shard {} failed", partner, shard, error);
                    return Mono.just(new Outcome(partner, shard, new SyncPullException(partner, shard, error)));
                });
    }

    private void afterPartner(String partner, long round, List<Outcome> outcomes) {
        List<Integer> failed = outcomes.stream().filter(outcome -> outcome.error() != null)
                .map(Outcome::shard).sorted(Comparator.naturalOrder()).toList();
        if (failed.size() < outcomes.size()) {
            backoff.succeeded(partner);
        }
        if (failed.isEmpty()) {
            return;
        }
        SyncPullException first = outcomes.stream().map(Outcome::error).filter(error -> error != null)
                .findFirst().orElseThrow();
        if (failed.size() == outcomes.size()) {
            long sitOut = backoff.failed(partner, round);
            log.warn("sync pulls from partner '{}' failed for every shard {} ({}); it sits out the next {}"
                    + " tick(s)", partner, failed, first.getCause().toString(), sitOut);
        } else {
            log.warn("sync pulls from partner '{}' failed for shards {} ({})", partner, failed,
                    first.getCause().toString());
        }
    }

    // ---- Membership -------------------------------------------------------------------------

    /** Subscribes to the membership source once; on error it resubscribes an interval later. */
    private void subscribeMembership() {
        Flux<Set<String>> source = config.membership();
        if (source == null || closed || !membershipSubscribed.compareAndSet(false, true)) {
            return;
        }
        membership.update(source
                .retryWhen(Retry.fixedDelay(Long.MAX_VALUE, config.interval()).scheduler(scheduler)
                        .doBeforeRetry(signal -> log.warn("membership source of node {} failed; resubscribing: {}",
                                config.localNode(), signal.failure().toString())))
                .subscribe(set -> {
                    List<String> sorted = new ArrayList<>(set);
                    // Sorted so every node derives the same ring; nulls kept for the tick to reject.
                    sorted.sort(Comparator.nullsFirst(Comparator.naturalOrder()));
                    members.set(sorted);
                }, error -> log.error("membership source of node {} stopped", config.localNode(), error)));
    }

    /** A pass in flight: its result for every waiter, and its subscription for shutdown. */
    private static final class RunningPass {
        final Sinks.One<SyncStats> result = Sinks.one();
        final Disposable.Swap subscription = Disposables.swap();
    }

    @Override
    public String toString() {
        return "SyncScheduler{" + config + "}";
    }
}
