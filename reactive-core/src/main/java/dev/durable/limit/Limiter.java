package dev.durable.limit;

import dev.durable.Limits;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import reactor.core.publisher.Mono;

/**
 * Admits claimed rows of named gates and rate limits, and counts the gate slots they hold.
 *
 * <p>The engine's contract with a limiter that does not {@linkplain #admitsInPick() admit inside
 * the pick}: the pick claims limited rows of known names without admitting them, then asks
 * {@link #admit} once per pick; rows not admitted go straight back to runnable (their attempt
 * restored) and the admitted ones keep their gate slot while they run, inline steps included.
 * Every heartbeat tick {@linkplain #renew renews} all slots the scheduler holds in one call; a slot
 * is {@linkplain #credit credited} when its run's outcome commits out of executing, when the row is
 * given back unrun, or when an inline step leaves its gate. A slot that is not renewed expires by
 * itself within {@link LimiterContext#slotTtl()}, so a crashed holder frees it without help. The
 * engine sends a slot's credit only once every renewal that carried the slot has returned, failed
 * or been cancelled, so a limiter may take a missing slot again on {@link #renew} without undoing a
 * credit, provided a renewal that failed or was cancelled on the engine's side cannot reach the
 * store after a later call on the same key does (the Redis limiter's calls for a key share one
 * connection, which keeps their order).
 *
 * <p>Errors: an unreachable limiter signals {@link LimiterUnavailableException}; the engine then
 * admits nothing limited (and keeps running unlimited rows). No method may block.
 */
public interface Limiter {

    /**
     * True when admission happens inside the pick statement and credit in the database (the
     * PostgreSQL limiter): the engine then never calls {@link #admit}, {@link #credit} or
     * {@link #renew}.
     */
    default boolean admitsInPick() {
        return false;
    }

    /**
     * Admits what it can of {@code claims}, given in urgency order: a rate-limited claim when its
     * bucket holds its weight (in order: a refused claim refuses the later ones of the same bucket),
     * a gated claim when its (gate, key, shard) has a free slot, which it then holds. All or
     * nothing: a claim is admitted only when each of its limits admits it, and a limit that admits
     * a claim another refuses keeps nothing of it (no token spent, no slot held once this emits).
     * Emits the ids admitted.
     */
    Mono<Set<Long>> admit(List<LimitClaim> claims);

    /**
     * Draws an inline step's rate and window slots before the step runs on its claim, which no pick
     * admits: {@code claim} has a rate slot, a window slot or both, and no gate (an inline step keeps
     * the slot it holds, or has left its gate). Emits true when its limits afforded the weights and
     * took them, all or nothing; on false the step goes back through the queue, where a pick admits
     * it. Every limiter is asked this, the ones that admit in the pick included. By default one
     * {@link #admit} of the claim.
     */
    default Mono<Boolean> draw(LimitClaim claim) {
        return admit(List.of(claim)).map(admitted -> admitted.contains(claim.id()));
    }

    /**
     * Takes {@code slots} slots of the counter (gate, key, shard) for a permit named {@code holder}
     * (unique), all or none, held for {@code lease} unless renewed or released: what
     * {@link EngineLimits#acquire} asks, once per try. The slots count against the gate's rows as a
     * claimed row's do. Emits whether it took them.
     */
    default Mono<Boolean> acquireSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
            Duration lease) {
        return Mono.error(new UnsupportedOperationException(this + " grants no permits"));
    }

    /** Extends a permit's slots by {@code lease}; emits false when they were lost (the lease had ended). */
    default Mono<Boolean> renewSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
            Duration lease) {
        return Mono.error(new UnsupportedOperationException(this + " grants no permits"));
    }

    /** Gives a permit's slots back; nothing when they are gone already. */
    default Mono<Void> releaseSlots(String holder, Limits.Gate gate, String key, int shard, int slots) {
        return Mono.error(new UnsupportedOperationException(this + " grants no permits"));
    }

    /**
     * Counts off the slots of permits whose lease ended, at most {@code counters} gate counters' worth
     * (one maintenance batch), bounded by {@code timeout}; emits how many permits. Nothing by default:
     * a limiter whose slots expire by themselves (Redis) has nothing to sweep.
     */
    default Mono<Long> sweepPermits(int counters, java.time.Duration timeout) {
        return Mono.just(0L);
    }

    /**
     * The slots live permits hold in this limiter's own store, per (gate, key), the most first, at most
     * {@code max} keys: what {@code admin().limits()} adds to the executing rows it counts in the
     * database. Nothing by default: the PostgreSQL limiter's permits are rows admin counts itself.
     */
    default Mono<List<PermitSlots>> permitSlots(int max) {
        return Mono.just(List.of());
    }

    /**
     * Takes {@code weight} of sliding window {@code window}'s partition {@code partition} when what
     * it admitted over the window's length plus {@code weight} stays within its limit; else takes
     * nothing. Emits whether it took it.
     */
    default Mono<Boolean> takeWindow(Limits.Window window, String partition, int weight) {
        return Mono.error(new UnsupportedOperationException(this + " has no sliding windows"));
    }

    /** Gives back the slots these claims hold (claims without a gate are ignored). */
    Mono<Void> credit(Collection<LimitClaim> claims);

    /**
     * Renews the slots these claims hold for another slot TTL; a slot lost meanwhile (expired, or
     * the store restarted empty) is taken again. Emits how many were missing.
     */
    Mono<Long> renew(Collection<LimitClaim> claims);

    /** Heals counters after crashes; emits how many were wrong. */
    Mono<Long> reconcile();

    /** Releases what the limiter holds (connections); idempotent. */
    default Mono<Void> close() {
        return Mono.empty();
    }
}
