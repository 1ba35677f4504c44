package dev.durable.internal.engine;

import dev.durable.internal.Errors;
import dev.durable.internal.sql.PickSql;
import dev.durable.limit.Limiter;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * One queue's pick, as its scheduler calls it: the statement that claims (or, with a limiter
 * outside the database, the {@link Admission} protocol around it) and the retry policy. A pick is
 * retried a bounded number of times when a concurrency key was claimed under it by another pick
 * (the executing-key unique index refused it) or it lost a deadlock; any other failure is the
 * scheduler's to report, and the poll tries again.
 */
final class Pick implements QueueScheduler.Picker {

    private final String queue;
    private final String worker;
    private final long leaseMillis;
    private final int retries;
    private final PickSql picks;
    private final Limiter limiter;
    private final Admission admission;
    private final SchedulerCounters counters;

    Pick(String queue, String worker, long leaseMillis, int retries, PickSql picks, Limiter limiter,
            Admission admission, SchedulerCounters counters) {
        this.queue = queue;
        this.worker = worker;
        this.leaseMillis = leaseMillis;
        this.retries = retries;
        this.picks = picks;
        this.limiter = limiter;
        this.admission = admission;
        this.counters = counters;
    }

    @Override
    public Mono<QueueScheduler.Picked> pick(int limit) {
        Mono<QueueScheduler.Picked> once = limiter.admitsInPick()
                ? picks.pick(queue, limit, worker, leaseMillis).collectList().map(rows -> new QueueScheduler.Picked(rows, 0))
                : admission.pick(limit, leaseMillis);
        return once
                .retryWhen(Retry.max(retries)
                        .filter(error -> Errors.isExecutingKeyTaken(error) || Errors.isDeadlock(error))
                        .doBeforeRetry(retry -> counters.pickRetries.incrementAndGet()))
                .doOnSubscribe(subscription -> counters.picks.incrementAndGet())
                .doOnError(error -> counters.pickFailures.incrementAndGet());
    }
}
