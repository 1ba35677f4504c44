package dev.durable.internal.engine;

import dev.durable.QueueOptions;
import dev.durable.internal.Db;
import dev.durable.internal.sql.FairPickSql.FairShare;
import dev.durable.internal.sql.LockedPickSql;
import dev.durable.internal.sql.Rows.Candidate;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.limit.GateSlot;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Admission by a limiter that is not in the database (Redis), for one queue's scheduler: the pick
 * asks it about limited rows while their locks are held, and this keeps the ledger of the gate
 * slots the admitted rows hold until they give them back.
 *
 * <p>The pick, in one transaction: lock the candidates, ask the limiter about the limited ones in
 * urgency order while holding the locks, claim only what it admitted (with the unlimited rows). A
 * refused row is never claimed, so it loses no attempt and the database never shows it executing;
 * its limit is skipped by this scheduler's picks for {@link #REFUSED_HOLD_MILLIS}, so the next pick
 * reaches unrelated rows behind it. An unreachable limiter admits nothing limited: unlimited rows
 * still run, limited ones wait in the queue.
 *
 * <p>The ledger: each admitted gated row holds a slot, renewed by the heartbeat ({@link #renew}) and
 * credited back when its run commits out of executing ({@link #runEnded}), when it is released
 * unrun ({@link #stopRenewing} then {@link #credit}), or when an inline step leaves its gate
 * ({@link #inlineStep}). A slot never credited expires by itself in the limiter. An inline step's
 * rate and window slots are drawn from the limiter ({@link #draw}).
 *
 * <p>A credit never overtakes a renewal that carries its slot. A renewal sends the slots held when
 * it starts, and the limiter takes a missing slot again (how holders re-assert after it lost its
 * data): a credit that reached the limiter first would be undone by the renewal behind it, and the
 * gate would admit one fewer until the slot's TTL. So a credit waits until the renewal in flight has
 * returned, failed or been cancelled: at most one limiter call, bounded by its timeout. (A credit of
 * a pick's own, for a slot no renewal ever carried, waits the same way; it is rare.)
 */
final class OutsideLimiterAdmission implements Admission {

    private static final Logger log = Loggers.getLogger(OutsideLimiterAdmission.class);
    /**
     * How long a limit the limiter refused is skipped by this scheduler's picks: long enough that a
     * saturated limit is not asked about in a hot loop, short enough that a freed slot is soon used.
     */
    static final long REFUSED_HOLD_MILLIS = 50;
    private static final String SEP = String.valueOf((char) 31);

    private final QueueContext queue;
    private final Db db;
    private final LockedPickSql picks;
    private final Limiter limiter;
    /**
     * The gate slots held by admitted rows (buffered or running), by row id. A slot leaves it, and a
     * renewal takes its snapshot of it, under {@link #ledger}, so a slot a renewal carries is credited
     * after that renewal. A slot enters it (the pick) without the lock: a renewal that misses it
     * carries it next time.
     */
    private final Map<Long, LimitClaim> slots = new ConcurrentHashMap<>();
    private final Object ledger = new Object();
    /**
     * Completes when the renewal in flight has ended; guarded by {@link #ledger}. One at a time: the
     * renewal loop waits for each ({@link SchedulerLoops}), so a renewal that carried a slot since
     * removed is this one or has ended.
     */
    private Mono<Void> renewal = Mono.empty();
    /** Limits the limiter refused lately (gate/key/shard, rate/partition), to the nanoTime they are skipped until. */
    private final Map<String, Long> refusedGates = new ConcurrentHashMap<>();
    private final Map<String, Long> refusedRates = new ConcurrentHashMap<>();
    private final AtomicLong claimSequence = new AtomicLong();
    private final Telemetry telemetry;

    /**
     * The admission of queue {@code options} by a limiter outside the database. A queue whose per-key
     * caps come from a function cannot have one: those caps are stored with the keys, in the database,
     * where only the in-database admission reads them.
     */
    static OutsideLimiterAdmission of(QueueOptions options, QueueContext queue, Db db, LockedPickSql picks,
            Limiter limiter, Telemetry telemetry) {
        if (options.fairness().keyCaps() != null) {
            throw new IllegalArgumentException("queue " + options.name() + ": per-key caps by a function need the"
                    + " PostgreSQL limiter; a limiter outside the database (Redis) admits the cap gate at one capacity"
                    + " for every key (give a static maxExecutingPerKey instead)");
        }
        return new OutsideLimiterAdmission(queue, db, picks, limiter, telemetry);
    }

    private OutsideLimiterAdmission(QueueContext queue, Db db, LockedPickSql picks, Limiter limiter,
            Telemetry telemetry) {
        this.telemetry = telemetry;
        this.queue = queue;
        this.db = db;
        this.picks = picks;
        this.limiter = limiter;
    }

    /**
     * The pick with admission by the limiter (see the class comment), the candidates shared across
     * fairness keys when {@code fair} is given: the database orders and offers them fairly, the
     * limiter admits them (a key's cap gate included).
     */
    @Override
    public Mono<Admitted> pick(int limit, @Nullable FairShare fair) {
        return Mono.defer(() -> {
            Map<Long, LimitClaim> asked = new ConcurrentHashMap<>();
            Set<Long> admitted = ConcurrentHashMap.newKeySet();
            int[] refused = new int[1];
            return db.inTransaction(connection -> picks.lockCandidates(connection, queue.queue(), limit,
                                    stillRefused(refusedGates), stillRefused(refusedRates), fair)
                            .collectList()
                            .flatMapMany(candidates -> {
                                List<LimitClaim> claims = claimsOf(candidates);
                                claims.forEach(claim -> asked.put(claim.id(), claim));
                                return admit(claims)
                                        .doOnNext(ok -> {
                                            admitted.addAll(ok);
                                            refused[0] = refuse(claims, ok, typesOf(candidates));
                                        })
                                        .flatMapMany(ok -> {
                                            List<Long> ids = candidates.stream()
                                                    .filter(c -> !c.limited() || ok.contains(c.id()))
                                                    .map(Candidate::id).toList();
                                            return ids.isEmpty() ? reactor.core.publisher.Flux.<ClaimedRow>empty()
                                                    : picks.claimLocked(connection, ids, queue.worker(),
                                                            queue.leaseMillis());
                                        });
                            }))
                    .collectList()
                    .map(rows -> {
                        for (ClaimedRow row : rows) {
                            LimitClaim claim = asked.remove(row.id());
                            if (claim != null && claim.holdsSlot()) {
                                slots.put(row.id(), claim);
                            }
                        }
                        // Admitted but not claimed (cannot happen under the locks, but a slot must never leak).
                        credit(admittedOf(asked.values(), admitted));
                        return new Admitted(rows, refused[0], List.of(), false);
                    })
                    // The transaction rolled back after the limiter admitted: the slots go back.
                    .doOnError(error -> credit(admittedOf(asked.values(), admitted)));
        });
    }

    /** The limiter's answer about the limited candidates; none admitted when it cannot be asked. */
    private Mono<Set<Long>> admit(List<LimitClaim> claims) {
        if (claims.isEmpty()) {
            return Mono.just(Set.of());
        }
        return limiter.admit(claims).onErrorResume(error -> {
            log.debug("queue {}: limiter unavailable, {} limited rows wait: {}", queue.queue(), claims.size(),
                    error.toString());
            // Its answer may have been lost after it took slots: give back any.
            credit(claims);
            return Mono.just(Set.of());
        });
    }

    /** The limited candidates' claims, in urgency order (the order the limiter admits in). */
    private List<LimitClaim> claimsOf(List<Candidate> candidates) {
        return candidates.stream().filter(Candidate::limited)
                .sorted(Comparator.comparingInt(Candidate::priority).thenComparingLong(Candidate::eligibleMicros)
                        .thenComparingLong(Candidate::id))
                .map(this::claimOf)
                .toList();
    }

    /** A candidate's limits; the holder is unique per claim (worker, row, a per-scheduler sequence). */
    private LimitClaim claimOf(Candidate candidate) {
        return new LimitClaim(candidate.id(), queue.worker() + SEP + candidate.id() + SEP + claimSequence.incrementAndGet(),
                candidate.gate(), candidate.rate(), candidate.window());
    }

    private static Map<Long, String> typesOf(List<Candidate> candidates) {
        Map<Long, String> types = new java.util.HashMap<>();
        candidates.forEach(candidate -> types.put(candidate.id(), candidate.type()));
        return types;
    }

    private static List<LimitClaim> admittedOf(Collection<LimitClaim> claims, Set<Long> admitted) {
        return claims.stream().filter(claim -> admitted.contains(claim.id())).toList();
    }

    /** Notes the limits of refused claims, to be skipped for a while; returns how many were refused. */
    private int refuse(List<LimitClaim> claims, Set<Long> admitted, Map<Long, String> types) {
        long until = System.nanoTime() + REFUSED_HOLD_MILLIS * 1_000_000;
        int refused = 0;
        // By reason, as the PostgreSQL pick counts: the limiter does not say which limit refused a
        // claim with both, so such a claim counts as held by its gate.
        long[] held = new long[2];
        long[] sample = {Long.MAX_VALUE, Long.MAX_VALUE};
        for (LimitClaim claim : claims) {
            if (admitted.contains(claim.id())) {
                continue;
            }
            refused++;
            int reason = claim.gate() != null ? 0 : 1;
            held[reason]++;
            sample[reason] = Math.min(sample[reason], claim.id());
            if (claim.gate() != null) {
                refusedGates.put(gateKey(claim.gate()), until);
            }
            // Keyed as the pick's skip list reads the row: name, chr(31), partition ('' for none).
            if (claim.rate() != null) {
                refusedRates.put(claim.rate().name() + SEP + claim.rate().partitionKey(), until);
            }
            if (claim.window() != null) {
                refusedRates.put(claim.window().name() + SEP + claim.window().partitionKey(), until);
            }
        }
        for (int reason = 0; reason < 2; reason++) {
            telemetry.throttled(queue.counters(), queue.queue(), reason == 0, held[reason], sample[reason],
                    types.get(sample[reason]));
        }
        return refused;
    }

    private static String gateKey(GateSlot slot) {
        return slot.name() + SEP + slot.key() + SEP + slot.shard();
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

    @Override
    public void credit(List<LimitClaim> claims) {
        List<LimitClaim> held = claims.stream().filter(LimitClaim::holdsSlot).toList();
        if (held.isEmpty()) {
            return;
        }
        // A slot of ours comes free: this scheduler's picks may ask for it again at once (the next
        // pick usually follows the credit to the limiter), and again once the credit has landed (a
        // pick refused while it waited for a renewal marked the gate refused meanwhile).
        Runnable askAgain = () -> held.forEach(claim -> refusedGates.remove(gateKey(claim.gate())));
        askAgain.run();
        Mono<Void> renewalInFlight;
        synchronized (ledger) {
            renewalInFlight = renewal;
        }
        renewalInFlight.then(Mono.defer(() -> limiter.credit(held)))
                .doFinally(signal -> askAgain.run())
                .subscribe(null, error -> log.debug("queue {}: credit failed, the slots expire by themselves: {}",
                        queue.queue(), error.toString()));
    }

    /**
     * When the inline step left its gate (a new or released key), the slot it held is given back; the
     * heartbeat then renews only what it still holds.
     */
    @Override
    public void inlineStep(ClaimedRow continued) {
        LimitClaim held = slots.get(continued.id());
        if (held != null && !Objects.equals(held.gate(), continued.gate())) {
            // A gate change is never inline (it goes through the pick), so the new step holds no slot.
            remove(continued.id());
            credit(List.of(held));
        }
    }

    /**
     * The run of row {@code id} ended. A committed or stale outcome gives its slot back; one that
     * did not commit leaves the row executing until its lease expires, and its slot, no longer
     * renewed, expires with it, so the gate never over-admits.
     */
    @Override
    public void runEnded(long id, boolean leftExecuting) {
        LimitClaim held = remove(id);
        if (held != null && leftExecuting) {
            credit(List.of(held));
        }
    }

    @Override
    public List<LimitClaim> stopRenewing(Collection<Long> ids) {
        List<LimitClaim> held = new ArrayList<>();
        for (Long id : ids) {
            LimitClaim claim = remove(id);
            if (claim != null) {
                held.add(claim);
            }
        }
        return held;
    }

    /** Takes a row's slot out of the ledger: from now on no renewal carries it. */
    private @Nullable LimitClaim remove(long id) {
        synchronized (ledger) {
            return slots.remove(id);
        }
    }

    @Override
    public Mono<Void> renew() {
        return Mono.defer(() -> {
            Sinks.Empty<Void> ended = Sinks.empty();
            List<LimitClaim> held;
            synchronized (ledger) {
                held = List.copyOf(slots.values());
                if (held.isEmpty()) {
                    return Mono.empty();
                }
                renewal = ended.asMono();
            }
            return renew(held).doFinally(signal -> ended.tryEmitEmpty());
        });
    }

    private Mono<Void> renew(List<LimitClaim> held) {
        // Deferred: a limiter that throws instead of failing its Mono still ends the renewal.
        return Mono.defer(() -> limiter.renew(held))
                .doOnNext(missing -> {
                    if (missing > 0) {
                        log.debug("queue {}: {} gate slots were lost and taken again", queue.queue(), missing);
                    }
                })
                .onErrorResume(error -> {
                    log.debug("queue {}: slot renewal failed: {}", queue.queue(), error.toString());
                    return Mono.empty();
                })
                .then();
    }

    @Override
    public Mono<Boolean> draw(ClaimedRow next) {
        return Admission.drawFrom(limiter, next);
    }
}
