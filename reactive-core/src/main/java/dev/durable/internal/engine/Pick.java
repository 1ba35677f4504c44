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

    private final QueueContext queue;
    private final int retries;
    private final PickSql picks;
    private final Limiter limiter;
    private final Admission admission;

    Pick(QueueContext queue, int retries, PickSql picks, Limiter limiter, Admission admission) {
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
                ? picks.pick(queue.queue(), limit, queue.worker(), queue.leaseMillis()).collectList()
                        .map(rows -> new QueueScheduler.Picked(rows, 0))
                : admission.pick(limit);
        return once
                .retryWhen(Retry.max(retries)
                        .filter(error -> Errors.isExecutingKeyTaken(error) || Errors.isDeadlock(error))
                        .doBeforeRetry(retry -> counters.pickRetries.incrementAndGet()))
                .doOnSubscribe(subscription -> counters.picks.incrementAndGet())
                .doOnError(error -> counters.pickFailures.incrementAndGet());
    }
}
