package dev.durable.internal.client;

import dev.durable.DurableDatabaseException;
import dev.durable.EngineClosedException;
import dev.durable.InvalidRequestException;
import dev.durable.JobRequest;
import dev.durable.Limits;
import dev.durable.limit.EngineLimits;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterUnavailableException;
import dev.durable.limit.Permit;
import dev.durable.limit.PermitTimeoutException;
import dev.durable.limit.RateSlot;
import dev.durable.limit.UnknownLimitException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * {@code engine.limits()}: permits from the engine's limiter for code outside jobs. A try is one
 * call to the limiter (a gate: {@link Limiter#acquireSlots}, a sharded gate's shards in turn from one
 * drawn at random until one grants; a rate limit: {@link Limiter#draw}; a sliding
 * window: {@link Limiter#takeWindow}); a wait
 * is tries with a growing, jittered pause (10 ms to 500 ms) until the bound, never a blocked thread.
 */
public final class EnginePermits implements EngineLimits {

    private static final Logger log = Loggers.getLogger(EnginePermits.class);
    private static final Duration FIRST_PAUSE = Duration.ofMillis(10);
    private static final Duration MAX_PAUSE = Duration.ofMillis(500);
    private static final int LOCK_CONFLICT_RETRIES = 3;

    /** A try the limit refused, to be retried (never seen by a caller). */
    private static final class Refused extends RuntimeException {

        private static final long serialVersionUID = 1L;

        Refused() {
            super("refused", null, false, false);
        }
    }

    private final String engine;
    private final Map<String, Limits.Gate> gates;
    private final Map<String, Limits.RateLimit> rateLimits;
    private final Map<String, Limits.Window> windows;
    private final Supplier<@Nullable Limiter> limiter;
    private final Turns turns;
    private final String holderPrefix;
    private final AtomicLong holders = new AtomicLong();

    /**
     * Permits of these limits, asked of the limiter {@code limiter} gives (null while the engine is not
     * running), at most {@code tryConcurrency} tries at once.
     */
    public EnginePermits(String engine, Map<String, Limits.Gate> gates, Map<String, Limits.RateLimit> rateLimits,
            Map<String, Limits.Window> windows, int tryConcurrency, Supplier<@Nullable Limiter> limiter) {
        this.engine = engine;
        this.turns = new Turns(tryConcurrency);
        // 64 random bits per engine instance tell apart engines of one name and restarts; a counter the rest.
        this.holderPrefix = engine + ":permit:" + Long.toString(ThreadLocalRandom.current().nextLong() >>> 1, 36) + ":";
        this.gates = gates;
        this.rateLimits = rateLimits;
        this.windows = windows;
        this.limiter = limiter;
    }

    @Override
    public Mono<Permit> acquire(String name, String key, int weight, Duration maxWait, Duration lease) {
        return Mono.defer(() -> {
            checkDuration("maxWait", maxWait);
            Request request = request(name, key, weight, lease);
            // Deferred: each retry is a new try (a new holder, another shard).
            return Mono.defer(() -> tryOnce(request))
                    .flatMap(permit -> permit.<Mono<Permit>>map(Mono::just).orElseGet(() -> Mono.error(new Refused())))
                    .retryWhen(Retry.backoff(Long.MAX_VALUE, FIRST_PAUSE).maxBackoff(MAX_PAUSE).jitter(0.5)
                            .filter(Refused.class::isInstance))
                    .timeout(maxWait, Mono.error(() -> new PermitTimeoutException("no permit of " + request.what()
                            + " within " + maxWait)));
        });
    }

    @Override
    public Mono<Optional<Permit>> tryAcquire(String name, String key, int weight, Duration lease) {
        return Mono.defer(() -> tryOnce(request(name, key, weight, lease)));
    }

    /** A checked request; throws (inside a defer) the typed error of a bad one. */
    private Request request(@Nullable String name, @Nullable String key, int weight, @Nullable Duration lease) {
        if (name == null) {
            throw new UnknownLimitException("limit name must not be null");
        }
        if (key == null) {
            throw new InvalidRequestException("the key of limit " + name + " must not be null (empty for none)");
        }
        if (key.getBytes(StandardCharsets.UTF_8).length > JobRequest.MAX_KEY_BYTES) {
            throw new InvalidRequestException("the key of limit " + name + " must be at most "
                    + JobRequest.MAX_KEY_BYTES + " bytes in UTF-8");
        }
        if (weight < 1) {
            throw new InvalidRequestException("the weight of a permit of " + name + " must be at least 1, was " + weight);
        }
        checkDuration("lease", lease);
        Limits.Gate gate = gates.get(name);
        if (gate != null) {
            // The largest shard's share: a weight above it could never be granted, and would wait in vain.
            if (weight > gate.shardCapacity(0)) {
                throw new InvalidRequestException("the weight of a permit of gate " + name + " must be at most "
                        + gate.shardCapacity(0) + " (its capacity per shard), was " + weight);
            }
            return new Request(gate, null, null, key, weight, lease);
        }
        Limits.RateLimit rate = rateLimits.get(name);
        if (rate != null) {
            if (weight > rate.burst()) {
                throw new InvalidRequestException("the weight of a permit of rate limit " + name + " must be at most "
                        + rate.burst() + " (its burst), was " + weight);
            }
            return new Request(null, rate, null, key, weight, lease);
        }
        Limits.Window window = windows.get(name);
        if (window != null) {
            if (weight > window.limit()) {
                throw new InvalidRequestException("the weight of a permit of window " + name + " must be at most "
                        + window.limit() + " (its limit), was " + weight);
            }
            return new Request(null, null, window, key, weight, lease);
        }
        throw new UnknownLimitException("unknown limit '" + name + "': configure it with EngineOptions.gate,"
                + " rateLimit or window (gates: " + gates.keySet() + ", rate limits: " + rateLimits.keySet()
                + ", windows: " + windows.keySet() + ")");
    }

    private static void checkDuration(String what, @Nullable Duration duration) {
        if (duration == null || duration.isNegative() || duration.isZero()) {
            throw new InvalidRequestException(what + " must be positive, was " + duration);
        }
    }

    /**
     * One try, each call to the limiter once a turn is free (see {@link Turns}): a sharded gate's
     * shards one after the other from one drawn at random until one grants, so a try refuses only
     * when every shard did.
     */
    private Mono<Optional<Permit>> tryOnce(Request request) {
        Limits.Gate gate = request.gate();
        if (gate == null || gate.shards() == 1) {
            return turns.run(() -> askLimiter(request, 0));
        }
        return tryShards(request, ThreadLocalRandom.current().nextInt(gate.shards()), 0);
    }

    /** Shard {@code (first + tried) % shards}, then the next one while they refuse, each shard once. */
    private Mono<Optional<Permit>> tryShards(Request request, int first, int tried) {
        int shards = request.gate().shards();
        return turns.run(() -> askLimiter(request, (first + tried) % shards))
                .flatMap(answer -> answer.isPresent() || tried + 1 == shards ? Mono.just(answer)
                        : tryShards(request, first, tried + 1));
    }

    /** A holder name unique across engines and restarts, made without SecureRandom (no blocking on a Reactor thread). */
    private String nextHolder() {
        return holderPrefix + Long.toString(holders.incrementAndGet(), 36);
    }

    private Mono<Optional<Permit>> askLimiter(Request request, int shard) {
        Limiter current = limiter.get();
        if (current == null) {
            return Mono.error(new EngineClosedException(engine));
        }
        String holder = nextHolder();
        if (request.window() != null) {
            return current.takeWindow(request.window(), request.key(), request.weight())
                    .map(granted -> granted ? Optional.of(new TokenPermit(request)) : Optional.empty());
        }
        if (request.gate() == null) {
            Limits.RateLimit rate = request.rate();
            return current.draw(new LimitClaim(0, holder, null, new RateSlot(rate.name(), request.key(), request.weight()),
                            null))
                    .map(granted -> granted ? Optional.of(new TokenPermit(request)) : Optional.empty());
        }
        Limits.Gate gate = request.gate();
        AtomicBoolean answered = new AtomicBoolean();
        return current.acquireSlots(holder, gate, request.key(), shard, request.weight(), request.lease())
                // A lock conflict rolled the try back whole (nothing taken): try again, a few times.
                .retryWhen(lockConflicts("a permit of " + request.what()))
                .doOnNext(granted -> answered.set(true))
                // A try cancelled in flight (the wait's bound, the caller) may have been granted: give it back.
                .doOnCancel(() -> {
                    if (!answered.get()) {
                        current.releaseSlots(holder, gate, request.key(), shard, request.weight())
                                .subscribe(null, error -> log.debug("a cancelled permit of {} expires by itself: {}",
                                        gate.name(), error.toString()));
                    }
                })
                .map(granted -> granted
                        ? Optional.of(new SlotPermit(current, holder, request, shard, Instant.now().plus(request.lease())))
                        : Optional.empty());
    }

    /**
     * At most {@code max} permit tries asking the limiter at once: the tries share the engine's
     * connection pool with picks, commits and heartbeats, so a crowd of waiting {@code acquire} calls
     * must not hold every connection. A try finding no free turn waits a short, jittered, growing pause
     * on the timer and looks again (no thread blocks, no queue to leak on cancel); a turn is given back
     * when its try ends, fails or is cancelled.
     */
    static final class Turns {

        /** No free turn now (never seen by a caller). */
        private static final class Busy extends RuntimeException {

            private static final long serialVersionUID = 1L;

            Busy() {
                super("busy", null, false, false);
            }
        }

        private static final Busy BUSY = new Busy();
        private static final Duration FIRST_LOOK = Duration.ofMillis(2);
        private static final Duration MAX_LOOK = Duration.ofMillis(50);
        /** About half a minute of looks at most 50 ms apart. */
        private static final long MAX_LOOKS = 600;

        private final int max;
        private final AtomicInteger taken = new AtomicInteger();

        Turns(int max) {
            this.max = max;
        }

        <T> Mono<T> run(Supplier<Mono<T>> task) {
            return Mono.defer(() -> {
                if (!enter()) {
                    return Mono.<T>error(BUSY);
                }
                AtomicBoolean left = new AtomicBoolean();
                return Mono.defer(task).doFinally(signal -> {
                    if (left.compareAndSet(false, true)) {
                        taken.decrementAndGet();
                    }
                });
            }).retryWhen(Retry.backoff(MAX_LOOKS, FIRST_LOOK).maxBackoff(MAX_LOOK).jitter(0.5)
                    .filter(Busy.class::isInstance)
                    // Bounded: a turn held by calls that never end (each is bounded by the call timeout)
                    // must not keep a try waiting for ever.
                    .onRetryExhaustedThrow((spec, signal) -> new LimiterUnavailableException("no free permit try"
                            + " turn after " + MAX_LOOKS + " looks: " + max + " tries at once are all busy",
                            signal.failure())));
        }

        private boolean enter() {
            for (;;) {
                int now = taken.get();
                if (now >= max) {
                    return false;
                }
                if (taken.compareAndSet(now, now + 1)) {
                    return true;
                }
            }
        }

        /** Turns in use now (tests). */
        int taken() {
            return taken.get();
        }
    }

    /**
     * A serialization failure or deadlock (40001, 40P01) aborted a permit statement: it took nothing,
     * so it is retried a few times; past them the caller sees {@link LimiterUnavailableException}.
     */
    static Retry lockConflicts(String what) {
        return Retry.backoff(LOCK_CONFLICT_RETRIES, FIRST_PAUSE).jitter(0.5)
                .filter(EnginePermits::isLockConflict)
                .onRetryExhaustedThrow((spec, signal) -> new LimiterUnavailableException(
                        "lock conflicts on the gate counter of " + what + ", " + LOCK_CONFLICT_RETRIES
                                + " times in a row", signal.failure()));
    }

    static boolean isLockConflict(Throwable error) {
        return error instanceof DurableDatabaseException db
                && ("40P01".equals(db.sqlState()) || "40001".equals(db.sqlState()));
    }

    /** One permit request, checked: of a gate or of a rate limit. */
    private record Request(Limits.@Nullable Gate gate, Limits.@Nullable RateLimit rate,
            Limits.@Nullable Window window, String key, int weight, Duration lease) {

        String name() {
            return gate != null ? gate.name() : rate != null ? rate.name() : window.name();
        }

        String what() {
            return (gate != null ? "gate " : rate != null ? "rate limit " : "window ") + name() + " (key '" + key
                    + "', weight " + weight + ")";
        }
    }

    /** A permit answers what it was asked for from its request. */
    private interface Requested extends Permit {

        Request request();

        @Override
        default String limit() {
            return request().name();
        }

        @Override
        default String key() {
            return request().key();
        }

        @Override
        default int weight() {
            return request().weight();
        }
    }

    /** Tokens spent, or a window's count taken: nothing to hold. */
    private record TokenPermit(Request request, Instant expiresAt) implements Requested {

        TokenPermit(Request request) {
            this(request, Instant.now());
        }

        @Override
        public boolean holdsSlots() {
            return false;
        }

        @Override
        public Mono<Boolean> renew() {
            return Mono.just(true);
        }

        @Override
        public Mono<Void> release() {
            return Mono.empty();
        }

        @Override
        public String toString() {
            return "Permit{" + request.what() + ", tokens spent}";
        }
    }

    /** Gate slots held in the limiter under {@code holder} until released or the lease ends. */
    private static final class SlotPermit implements Requested {

        private final Limiter limiter;
        private final String holder;
        private final Request request;
        private final int shard;
        private volatile Instant expiresAt;
        private final AtomicBoolean released = new AtomicBoolean();

        SlotPermit(Limiter limiter, String holder, Request request, int shard, Instant expiresAt) {
            this.limiter = limiter;
            this.holder = holder;
            this.request = request;
            this.shard = shard;
            this.expiresAt = expiresAt;
        }

        @Override
        public Request request() {
            return request;
        }

        @Override
        public boolean holdsSlots() {
            return true;
        }

        @Override
        public Instant expiresAt() {
            return expiresAt;
        }

        @Override
        public Mono<Boolean> renew() {
            return Mono.defer(() -> {
                if (released.get()) {
                    return Mono.just(false);
                }
                Instant next = Instant.now().plus(request.lease());
                return limiter.renewSlots(holder, request.gate(), request.key(), shard, request.weight(), request.lease())
                        .retryWhen(lockConflicts("the renewal of " + this))
                        .doOnNext(renewed -> {
                            if (renewed) {
                                expiresAt = next;
                            }
                        });
            });
        }

        @Override
        public Mono<Void> release() {
            return Mono.defer(() -> released.compareAndSet(false, true)
                    ? limiter.releaseSlots(holder, request.gate(), request.key(), shard, request.weight())
                            .retryWhen(lockConflicts("the release of " + this))
                    : Mono.empty());
        }

        @Override
        public String toString() {
            return "Permit{" + request.what() + ", shard " + shard + ", until " + expiresAt + "}";
        }
    }
}
