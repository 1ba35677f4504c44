package dev.durable.limit;

import java.time.Duration;
import java.util.Optional;
import reactor.core.publisher.Mono;

/**
 * The engine's gates and rate limits for code outside jobs ({@code engine.limits()}): a WebFlux
 * handler takes a permit from the same cluster-wide counters and buckets as the jobs, on the same
 * limiter (PostgreSQL or Redis). A gate permit holds {@code weight} slots of the gate's counter for
 * {@code key} (counted against the jobs of that gate and key, and shown by
 * {@code admin().limits()}) until it is released or its lease ends; a rate-limit permit spends
 * {@code weight} tokens of the bucket of partition {@code key}; a sliding-window permit counts
 * {@code weight} on partition {@code key} of the window. A name is looked up as a gate, then a
 * rate limit, then a window.
 *
 * <p>Errors, as {@code Mono.error}: {@link UnknownLimitException} for a name that is neither a gate
 * nor a rate limit of this engine, {@link dev.durable.InvalidRequestException} for a weight below 1
 * or one the limit can never grant (above a gate shard's capacity, a bucket's burst or a window's limit),
 * {@link PermitTimeoutException} when {@link #acquire} waited its whole bound,
 * {@link LimiterUnavailableException} when the limiter cannot be asked, and
 * {@link dev.durable.EngineClosedException} before start or after close. Nothing blocks: waiting is
 * polling the limiter with a growing pause, and cancelling the subscription stops it.
 */
public interface EngineLimits {

    /** How long {@link #acquire(String, String, int)} waits. */
    Duration DEFAULT_MAX_WAIT = Duration.ofSeconds(30);

    /** The lease of a gate permit unless one is given. */
    Duration DEFAULT_LEASE = Duration.ofSeconds(60);

    /** Waits up to {@link #DEFAULT_MAX_WAIT} for a permit, with the {@link #DEFAULT_LEASE}. */
    default Mono<Permit> acquire(String name, String key, int weight) {
        return acquire(name, key, weight, DEFAULT_MAX_WAIT, DEFAULT_LEASE);
    }

    /**
     * Waits up to {@code maxWait} for {@code weight} slots of gate {@code name} (key {@code key}),
     * {@code weight} tokens of rate limit {@code name} or {@code weight} of window {@code name}
     * (partition {@code key}); a gate permit's
     * slots are held for {@code lease} unless renewed or released.
     */
    Mono<Permit> acquire(String name, String key, int weight, Duration maxWait, Duration lease);

    /** One try, with the {@link #DEFAULT_LEASE}: a permit, or empty when the limit refused now. */
    default Mono<Optional<Permit>> tryAcquire(String name, String key, int weight) {
        return tryAcquire(name, key, weight, DEFAULT_LEASE);
    }

    /** One try: a permit, or empty when the limit refused now. */
    Mono<Optional<Permit>> tryAcquire(String name, String key, int weight, Duration lease);
}
