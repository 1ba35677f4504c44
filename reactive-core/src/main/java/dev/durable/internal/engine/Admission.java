package dev.durable.internal.engine;

import dev.durable.internal.sql.FairPickSql.FairShare;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.Loggers;

/**
 * How one queue's rows get past the engine's gates, rate limits and sliding windows, for the whole
 * life of a claim: admitted when a pick claims them ({@link #pick}), their gate slots renewed on the
 * heartbeat's slot tick ({@link #renew}) and given back when they are released unrun
 * ({@link #stopRenewing}, {@link #credit}), when an inline step leaves its gate ({@link #inlineStep})
 * and when their run ends ({@link #runEnded}); and an inline step, which no pick admits, draws its
 * rate and window slots before it runs ({@link #draw}).
 *
 * <p>Two ways, chosen once per queue when the runtime starts, by whether the limiter admits inside
 * the pick ({@link Limiter#admitsInPick}): {@link InDatabaseAdmission} (the PostgreSQL limiter: the
 * pick statement admits, a trigger credits, nothing expires) and {@link OutsideLimiterAdmission} (a
 * limiter outside the database, Redis: asked around the pick, with a ledger of the gate slots the
 * admitted rows hold). What the limits held back at a pick is counted and told (THROTTLED) either way.
 */
interface Admission {

    /**
     * What one pick statement claimed; how many limited rows the limiter refused at it (a pick that
     * had rows refused looks again at once: their limits are skipped now); and, of a fair queue, the
     * keys it found foreign to this engine and whether it walked a key whose cap was never asked for.
     */
    record Admitted(List<ClaimedRow> rows, int refused, List<String> foreignKeys, boolean unasked) {
    }

    /**
     * Claims up to {@code limit} rows of the queue in one pick, admitting the limited ones, shared
     * across fairness keys when {@code fair} is given.
     */
    Mono<Admitted> pick(int limit, @Nullable FairShare fair);

    /** Renews every gate slot the queue's rows hold, in one call; a failure leaves them to expire. */
    Mono<Void> renew();

    /**
     * The slots of rows about to be released: no longer renewed from here, to be
     * {@linkplain #credit credited} once the rows are back.
     */
    List<LimitClaim> stopRenewing(Collection<Long> ids);

    /** Gives back gate slots, fire and forget: a slot not credited expires by itself. */
    void credit(List<LimitClaim> claims);

    /**
     * An inline step is about to run on its row's claim ({@code continued}: what its commit left on
     * the row): the gate slot it no longer holds is given back.
     */
    void inlineStep(ClaimedRow continued);

    /**
     * The run of row {@code id} ended: its outcome committed or was dropped as stale
     * ({@code leftExecuting}: the claim no longer holds the row executing, so its slot goes back), or
     * its commit failed (the row stays executing until its lease lapses, and its slot, no longer
     * renewed, with it, so the gate never over-admits).
     */
    void runEnded(long id, boolean leftExecuting);

    /**
     * Draws the rate and window slots of an inline step ({@code next}) before it runs, all or none;
     * emits true when it may run on its claim, false when it must go through the queue instead (a
     * limit refused, or the limiter could not be asked), where a pick admits it. A step with neither
     * slot needs nothing; nor does a gate: an inline step keeps the slot its claim holds or leaves the
     * gate, and a gate change is never inline. Every limiter is asked this, the ones that admit in the
     * pick included ({@link Limiter#draw}).
     */
    Mono<Boolean> draw(ClaimedRow next);

    /** {@link #draw} of an inline step from {@code limiter}: what both ways share. */
    static Mono<Boolean> drawFrom(Limiter limiter, ClaimedRow next) {
        if (next.rate() == null && next.window() == null) {
            return Mono.just(true);
        }
        // It holds no slot, so any unique name does: the worker and the row, a separator between them.
        LimitClaim claim = new LimitClaim(next.id(), next.worker() + (char) 31 + "inline" + (char) 31 + next.id(),
                null, next.rate(), next.window());
        return limiter.draw(claim)
                .onErrorResume(error -> {
                    Loggers.getLogger(Admission.class).debug("instance {}: inline step's tokens not drawn ({});"
                            + " it goes through the queue", next.id(), error.toString());
                    return Mono.just(false);
                })
                .defaultIfEmpty(false);
    }
}
