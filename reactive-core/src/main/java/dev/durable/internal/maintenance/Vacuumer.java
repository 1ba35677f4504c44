package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.VacuumSql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The vacuumer: VACUUMs a hot table holding at least {@link #MIN_DEAD} dead tuples, so a busy
 * queue's dead versions are removed every few seconds instead of once per
 * {@code autovacuum_naptime} (a minute by default, server-wide). Between autovacuum's passes a
 * table at 20,000 jobs a second carries millions of dead versions whose index entries every pick
 * and claim steps over: a minute at saturation ran at half the throughput without it
 * (benchmarks/README.md, "Sustained load"). Each tick costs one catalog query; a VACUUM runs only
 * past the threshold, the autovacuum threshold the baseline schema gives the instances table, so
 * it does what autovacuum would as soon as autovacuum would want to. Counted by
 * {@code durable.maintenance.vacuumed} (a VACUUM that skipped its table for a lock counts too; the
 * next tick looks again).
 *
 * <p>A VACUUM cannot remove what a snapshot may still see: while a long transaction, a replication
 * slot or a standby holds the xmin horizon back, the dead tuples stay after it. The threshold
 * therefore counts from what the table's last VACUUM here left (until the count falls below it), so a
 * held horizon costs one VACUUM per {@link #MIN_DEAD} new dead tuples, not one per tick.
 *
 * <p>A table this role may not VACUUM (not its owner, no MAINTAIN) is reported once, at WARN, and
 * left to autovacuum; the pass does not fail.
 *
 * <p><b>Safe on all nodes</b>: {@code VACUUM (SKIP_LOCKED)} skips a table autovacuum or another
 * node is vacuuming, and a table just vacuumed elsewhere no longer has the dead tuples.
 */
public final class Vacuumer extends MaintenanceService {

    private static final Logger log = Loggers.getLogger(Vacuumer.class);

    /** The hot table's autovacuum_vacuum_threshold in the baseline schema. */
    static final long MIN_DEAD = 10_000;

    private final VacuumSql sql;
    private final Set<String> refused = ConcurrentHashMap.newKeySet();
    /** Per table, the dead tuples its last VACUUM here left. */
    private final Map<String, Long> left = new ConcurrentHashMap<>();

    public Vacuumer(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, VacuumSql sql) {
        super("vacuumer", options, lane, timer, meters, "durable.maintenance.vacuumed");
        this.sql = sql;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.dead(0, timeout)
                .flatMapMany(Flux::fromIterable)
                // Fewer dead than the last VACUUM left: the horizon moved on and a vacuum took them.
                .doOnNext(dead -> left.computeIfPresent(dead.table(), (table, was) -> Math.min(was, dead.deadRows())))
                .filter(dead -> dead.deadRows() >= left.getOrDefault(dead.table(), 0L) + MIN_DEAD)
                .concatMap(dead -> {
                    if (!dead.mayVacuum()) {
                        if (refused.add(dead.table())) {
                            log.warn("maintenance task vacuumer: role {} may not VACUUM {} (its owner may, or a role"
                                    + " with MAINTAIN on PostgreSQL 17), so its dead rows wait for autovacuum"
                                    + " (autovacuum_naptime) and the picks step over them until then; turn the task"
                                    + " off with EngineOptions.Builder.vacuumer to silence this", dead.role(),
                                    sql.qualified(dead.table()));
                        }
                        return Mono.empty();
                    }
                    return sql.vacuum(dead.table(), timeout).map(remaining -> {
                        left.put(dead.table(), remaining);
                        return 1L;
                    });
                })
                .reduce(0L, Long::sum);
    }

    /** One batch is the whole pass: the next tick looks again. */
    @Override
    protected boolean full(long count) {
        return false;
    }
}
