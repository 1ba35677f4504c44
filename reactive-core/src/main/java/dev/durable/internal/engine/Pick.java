package dev.durable.internal.engine;

import dev.durable.Fairness;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.FairPickSql;
import dev.durable.internal.sql.FairPickSql.FairShare;
import dev.durable.internal.sql.PickSql;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * One queue's pick, as its scheduler calls it: the claim, with its limited rows admitted by the
 * queue's {@link Admission}, and the retry policy. Keys that another pick is claiming are skipped by
 * the statement itself; a pick is retried a bounded number of times, after a short jittered pause,
 * when a key was claimed under it anyway (the executing-key unique index refused it) or it lost a
 * deadlock; any other failure is the scheduler's to report, and the poll tries again. Before a pick,
 * a fair queue's weights and caps are refreshed and priorities aged, each at most every few seconds.
 */
final class Pick implements Picker {

    private static final Duration RETRY_PAUSE = Duration.ofMillis(5);

    private final QueueContext queue;
    private final int retries;
    private final PickSql picks;
    private final Admission admission;
    private final @Nullable FairShare fair;
    private final Fairness fairness;
    /** When (System.nanoTime) priorities were last aged; aging runs before a pick. */
    private long agedAt = System.nanoTime();

    /** When (System.nanoTime) the weigher last weighed the keys in line; 0 before the first pick. */
    private long weighedAt;

    /** The least time between two askings when a pick walked a key whose cap was never asked for. */
    static final Duration ASK_AGAIN_AFTER = Duration.ofSeconds(1);

    /** The most keys the weigher is asked about at once (those next in line). */
    static final int WEIGHED_KEYS = 1_000;

    /**
     * Keys of a fair queue whose due rows this engine cannot run (other types, newer versions), as
     * its picks found them, and until when (System.nanoTime) they step over them: a key costs this
     * engine one bounded look per {@link #FOREIGN_FOR}, and cannot fill its walk. Insertion order
     * (renewed on each find), so the oldest is forgotten first. Picks of one queue never overlap.
     */
    private final java.util.LinkedHashMap<String, Long> foreign = new java.util.LinkedHashMap<>();

    /** How long a key found foreign is stepped over. */
    static final Duration FOREIGN_FOR = Duration.ofSeconds(10);

    /** The most keys stepped over at once (a bound on the walk's extra cost too). */
    static final int FOREIGN_KEYS = 1_000;

    /** The most statements of one pick walking on past foreign keys. */
    static final int FOREIGN_ROUNDS = 4;

    /** The most rows one aging statement lifts (the rest wait for the next step). */
    static final int AGING_BATCH = 1_000;

    Pick(QueueContext queue, int retries, PickSql picks, Admission admission) {
        this(queue, retries, picks, admission, Fairness.none());
    }

    /** A pick that shares claims across keys as {@code fairness} says (with either kind of admission). */
    Pick(QueueContext queue, int retries, PickSql picks, Admission admission, Fairness fairness) {
        // A key whose cap was never asked for: held to one claim when caps come from a function.
        this.fair = fairness.enabled() ? new FairShare(fairness.weights().keySet().toArray(String[]::new),
                fairness.weights().values().toArray(Double[]::new), fairness.defaultWeight())
                .capping(fairness.keyCaps() != null ? Integer.valueOf(1) : null) : null;
        this.fairness = fairness;
        this.queue = queue;
        this.retries = retries;
        this.picks = picks;
        this.admission = admission;
    }

    @Override
    public Mono<Picker.Picked> pick(int limit) {
        SchedulerCounters counters = queue.counters();
        return weighing().then(aging())
                .then(claim(limit, 1))
                .doOnSubscribe(subscription -> counters.picks.incrementAndGet())
                .doOnError(error -> counters.pickFailures.incrementAndGet());
    }

    /**
     * One pick (the {@code round}th of this pick). A fair pick steps over the keys found foreign to
     * this engine ({@link #foreign}); when it finds more and comes back short, its walk was spent on
     * keys this engine cannot run, so it walks on past them at once (at most {@link #FOREIGN_ROUNDS}
     * statements), rather than leave the keys it can run to the next poll.
     */
    private Mono<Picker.Picked> claim(int limit, int round) {
        return retried(Mono.defer(() -> admission.pick(limit, fair == null ? null : fair.steppingOver(steppedOver()))))
                .flatMap(picked -> {
                    Picker.Picked claimed = new Picker.Picked(picked.rows(), picked.refused());
                    remember(picked.foreignKeys());
                    if (picked.unasked() && fairness.keyCaps() != null
                            && System.nanoTime() - weighedAt >= ASK_AGAIN_AFTER.toNanos()) {
                        // It walked a key whose cap is unknown (held to one claim): ask before the next pick.
                        weighedAt = 0;
                    }
                    int left = limit - picked.rows().size();
                    if (picked.foreignKeys().isEmpty() || left <= 0 || round >= FOREIGN_ROUNDS) {
                        return Mono.just(claimed);
                    }
                    return claim(left, round + 1).map(more -> new Picker.Picked(
                            java.util.stream.Stream.concat(claimed.rows().stream(), more.rows().stream()).toList(),
                            claimed.refused() + more.refused()));
                });
    }

    /** After a short random pause: two picks that raced for a key must not race again in step. */
    private <T> Mono<T> retried(Mono<T> attempt) {
        return attempt.retryWhen(Retry.backoff(retries, RETRY_PAUSE).maxBackoff(RETRY_PAUSE.multipliedBy(8)).jitter(0.75)
                .filter(error -> Errors.isExecutingKeyTaken(error) || Errors.isDeadlock(error))
                .doBeforeRetry(retry -> queue.counters().pickRetries.incrementAndGet()));
    }

    /** The keys to step over now: those found foreign less than {@link #FOREIGN_FOR} ago. */
    private String[] steppedOver() {
        long now = System.nanoTime();
        foreign.values().removeIf(until -> until - now <= 0);
        return foreign.keySet().toArray(String[]::new);
    }

    /** Steps over these keys for {@link #FOREIGN_FOR}, the oldest forgotten beyond {@link #FOREIGN_KEYS}. */
    private void remember(java.util.List<String> keys) {
        long until = System.nanoTime() + FOREIGN_FOR.toNanos();
        for (String key : keys) {
            foreign.remove(key);
            foreign.put(key, until);
        }
        java.util.Iterator<String> oldest = foreign.keySet().iterator();
        while (foreign.size() > FOREIGN_KEYS && oldest.hasNext()) {
            oldest.next();
            oldest.remove();
        }
    }

    /**
     * Ages the queue's priorities before a pick, once a second or once a step if shorter (the rows'
     * waits are by the database clock). A failure is left for the next step: aging is an aid,
     * never a reason to skip a pick.
     */
    private Mono<Void> aging() {
        java.time.Duration step = fairness.agingStep();
        long now = System.nanoTime();
        // At most once a second, at least once a step: each run lifts a row only by the steps it has waited.
        if (step == null || now - agedAt < Math.min(step.toNanos(), 1_000_000_000L)) {
            return Mono.empty();
        }
        agedAt = now;
        return picks.age(queue.queue(), step.toMillis(), fairness.agingFloor(), AGING_BATCH)
                .onErrorResume(error -> Mono.empty())
                .then();
    }

    /**
     * Asks the queue's weigher and cap function for the weights and caps of the keys next in line,
     * before the first pick and then every {@link Fairness#WEIGHER_REFRESH}, and stores those that
     * changed, where every engine's pick reads them (a key with a static weight keeps what is stored:
     * the pick passes its weight). A failure (of a function or the database) is left for the next refresh.
     */
    private Mono<Void> weighing() {
        long now = System.nanoTime();
        if ((fairness.weigher() == null && fairness.keyCaps() == null)
                || (weighedAt != 0 && now - weighedAt < Fairness.WEIGHER_REFRESH.toNanos())) {
            return Mono.empty();
        }
        weighedAt = now;
        return picks.fair().keysInLine(queue.queue(), WEIGHED_KEYS)
                .mapNotNull(this::reweighed)
                .collectList()
                .flatMap(shares -> shares.isEmpty() ? Mono.empty()
                        : picks.fair().storeShares(queue.queue(), sorted(shares), fairness.capGateCapacity()))
                .onErrorResume(error -> Mono.empty())
                .then();
    }

    /** The key's weight and cap as the functions answer now, or null when that is what is stored. */
    private FairPickSql.@Nullable KeyShare reweighed(FairPickSql.KeyShare stored) {
        String key = stored.key();
        Double weight = fairness.weigher() == null || fairness.weights().containsKey(key) ? stored.weight()
                : Double.valueOf(fairness.weight(key));
        Integer cap = fairness.keyCaps() == null ? null : fairness.keyCap(key);
        // 0: asked, no cap of its own (the static cap holds); null is "never asked".
        FairPickSql.KeyShare now = new FairPickSql.KeyShare(key, weight,
                fairness.keyCaps() == null ? null : cap == null ? Integer.valueOf(0) : cap);
        return now.equals(stored) ? null : now;
    }

    /** In key order, so two engines storing the same keys lock them in the same order. */
    private static java.util.List<FairPickSql.KeyShare> sorted(java.util.List<FairPickSql.KeyShare> shares) {
        return shares.stream().sorted(java.util.Comparator.comparing(FairPickSql.KeyShare::key)).toList();
    }
}
