package dev.durable.limit;

import java.time.Instant;
import reactor.core.publisher.Mono;

/**
 * What {@link EngineLimits#acquire} gave: a gate's slots, held until {@link #release()} or until the
 * lease ends ({@link #expiresAt()}, extended by {@link #renew()}), or a rate limit's tokens, which
 * were simply spent (releasing such a permit does nothing). A caller that crashes stops renewing,
 * so its slots come free when the lease ends; they are counted against the gate's jobs meanwhile.
 */
public interface Permit {

    /** The gate or rate limit this permit is of. */
    String limit();

    /** The gate's key or the rate limit's partition. */
    String key();

    /** How many slots (gate) or tokens (rate limit) it took. */
    int weight();

    /** Whether it holds gate slots (a rate limit's permit holds nothing). */
    boolean holdsSlots();

    /** When the slots come free unless renewed, as this process last set it (a token permit: when it was acquired). */
    Instant expiresAt();

    /**
     * Extends the lease by the lease it was acquired with; emits false when the slots were already
     * lost (the lease ended first, or the limiter lost them), true otherwise and for a token permit.
     */
    Mono<Boolean> renew();

    /** Gives the slots back at once; idempotent, and nothing for a token permit. */
    Mono<Void> release();
}
