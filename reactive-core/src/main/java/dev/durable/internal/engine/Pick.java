package dev.durable.internal.engine;

import dev.durable.Fairness;
import dev.durable.internal.Errors;
import java.time.Duration;
import dev.durable.internal.sql.PickSql;
import dev.durable.limit.Limiter;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * One queue's pick, as its scheduler calls it: the statement that claims (or, with a limiter
 * outside the database, the {@link Admission} protocol around it) and the retry policy. Keys that
 * another pick is claiming are skipped by the statement itself; a pick is retried a bounded number
 * of times, after a short jittered pause, when a key was claimed under it anyway (the executing-key
 * unique index refused it) or it lost a deadlock; any other failure is the scheduler's to report,
 * and the poll tries again. What the limits held back at a pick is counted and told (THROTTLED).
 */
final class Pick implements QueueScheduler.Picker {

    private static final Duration RETRY_PAUSE = Duration.ofMillis(5);

    private final QueueContext queue;
    private final int retries;
    private final PickSql picks;
    private final Limiter limiter;
    private final Admission admission;
    private final Telemetry telemetry;
    private final PickSql.@Nullable FairShare fair;
    private final Fairness fairness;
    /** When (System.nanoTime) priorities were last aged; aging runs before a pick. */
    private long agedAt = System.nanoTime();

    /** When (System.nanoTime) the weigher last weighed the keys in line; 0 before the first pick. */
    private long weighedAt;

    /** The most keys the weigher is asked about at once (those next in line). */
    static final int WEIGHED_KEYS = 1_000;

    /** The most rows one aging statement lifts (the rest wait for the next step). */
    static final int AGING_BATCH = 1_000;

    Pick(QueueContext queue, int retries, PickSql picks, Limiter limiter, Admission admission, Telemetry telemetry) {
        this(queue, retries, picks, limiter, admission, telemetry, Fairness.none());
    }

    /** A pick that shares claims across keys as {@code fairness} says (with either kind of limiter). */
    Pick(QueueContext queue, int retries, PickSql picks, Limiter limiter, Admission admission, Telemetry telemetry,
            Fairness fairness) {
        this.fair = fairness.enabled() ? new PickSql.FairShare(fairness.weights().keySet().toArray(String[]::new),
                fairness.weights().values().toArray(Double[]::new), fairness.defaultWeight()) : null;
        this.fairness = fairness;
        this.telemetry = telemetry;
        this.queue = queue;
        this.retries = retries;
        this.picks = picks;
        this.limiter = limiter;
        this.admission = admission;
    }

    @Override
    public Mono<QueueScheduler.Picked> pick(int limit) {
        SchedulerCounters counters = queue.counters();
        Mono<QueueScheduler.Picked> once = limiter.admitsInPick()
                ? picks.pick(queue.queue(), limit, queue.worker(), queue.leaseMillis(), fair)
                        .map(picked -> {
                            throttled(true, picked.byGate());
                            throttled(false, picked.byRate());
                            // Refused stays 0: the statement already skips full limits, so looking
                            // again at once would only find them full again.
                            return new QueueScheduler.Picked(picked.rows(), 0);
                        })
                : admission.pick(limit, fair);
        return weighing().then(aging()).then(once)
                // After a short random pause: two picks that raced for a key must not race again in step.
                .retryWhen(Retry.backoff(retries, RETRY_PAUSE).maxBackoff(RETRY_PAUSE.multipliedBy(8)).jitter(0.75)
                        .filter(error -> Errors.isExecutingKeyTaken(error) || Errors.isDeadlock(error))
                        .doBeforeRetry(retry -> counters.pickRetries.incrementAndGet()))
                .doOnSubscribe(subscription -> counters.picks.incrementAndGet())
                .doOnError(error -> counters.pickFailures.incrementAndGet());
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
     * Asks the queue's weigher for the weights of the keys next in line, every
     * {@link Fairness#WEIGHER_REFRESH}, and stores those that changed, where every engine's pick reads
     * them. A failure (of the weigher or the database) is left for the next refresh.
     */
    private Mono<Void> weighing() {
        long now = System.nanoTime();
        if (fairness.weigher() == null || (weighedAt != 0 && now - weighedAt < Fairness.WEIGHER_REFRESH.toNanos())) {
            return Mono.empty();
        }
        weighedAt = now;
        return picks.keysInLine(queue.queue(), WEIGHED_KEYS)
                .filter(key -> !fairness.weights().containsKey(key.key()))
                .map(key -> new PickSql.KeyWeight(key.key(), fairness.weight(key.key())))
                .collectList()
                .flatMap(weights -> weights.isEmpty() ? Mono.empty() : picks.storeWeights(queue.queue(), weights))
                .onErrorResume(error -> Mono.empty())
                .then();
    }

    private void throttled(boolean byGate, PickSql.Throttled held) {
        telemetry.throttled(queue.counters(), queue.queue(), byGate, held.rows(), held.sampleId(), held.sampleType());
    }
}
