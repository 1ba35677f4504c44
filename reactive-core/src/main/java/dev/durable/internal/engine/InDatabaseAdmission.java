package dev.durable.internal.engine;

import dev.durable.internal.sql.FairPickSql.FairShare;
import dev.durable.internal.sql.PickSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * Admission in the database, by the PostgreSQL limiter ({@link Limiter#admitsInPick}): the pick is
 * one statement that admits its limited rows as it claims them ({@code AdmissionSql}), so a row is
 * only ever claimed once each of its limits admitted it; the {@code durable_gate_release} trigger
 * credits a gate slot the moment its row leaves executing (an outcome, a release, the reaper, a key
 * change), and counters do not expire, so there is nothing to renew or credit from here. An inline
 * step draws its tokens and window count from the limiter, in one statement.
 */
final class InDatabaseAdmission implements Admission {

    private final QueueContext queue;
    private final PickSql picks;
    private final Limiter limiter;
    private final Telemetry telemetry;

    InDatabaseAdmission(QueueContext queue, PickSql picks, Limiter limiter, Telemetry telemetry) {
        this.queue = queue;
        this.picks = picks;
        this.limiter = limiter;
        this.telemetry = telemetry;
    }

    /**
     * One pick statement; what full gates and empty buckets held back is told. Refused stays 0: the
     * statement already skips full limits, so looking again at once would only find them full again.
     */
    @Override
    public Mono<Admitted> pick(int limit, @Nullable FairShare fair) {
        return picks.pick(queue.queue(), limit, queue.worker(), queue.leaseMillis(), fair)
                .map(picked -> {
                    throttled(true, picked.byGate());
                    throttled(false, picked.byRate());
                    return new Admitted(picked.rows(), 0, picked.foreignKeys(), picked.unasked());
                });
    }

    private void throttled(boolean byGate, PickSql.Throttled held) {
        telemetry.throttled(queue.counters(), queue.queue(), byGate, held.rows(), held.sampleId(), held.sampleType());
    }

    /** Nothing: counters are exact (the trigger) and do not expire. */
    @Override
    public Mono<Void> renew() {
        return Mono.empty();
    }

    /** None: no slot is held here, the trigger counts them off as the rows leave executing. */
    @Override
    public List<LimitClaim> stopRenewing(Collection<Long> ids) {
        return List.of();
    }

    @Override
    public void credit(List<LimitClaim> claims) {
    }

    /** Nothing: a key change's commit left the gate, and the trigger credited the slot then. */
    @Override
    public void inlineStep(ClaimedRow continued) {
    }

    /** Nothing: the trigger credited the slot when the outcome took the row out of executing. */
    @Override
    public void runEnded(long id, boolean leftExecuting) {
    }

    @Override
    public Mono<Boolean> draw(ClaimedRow next) {
        return Admission.drawFrom(limiter, next);
    }
}
