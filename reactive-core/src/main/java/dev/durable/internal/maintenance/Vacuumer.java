package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.VacuumSql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
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
 * and claim steps over: the shootout's sustained run halved its throughput after the first minute
 * without it (benchmarks/README.md, "Sustained load"). Each tick costs one catalog query; a VACUUM
 * runs only past the threshold, which is the hot table's own autovacuum threshold (the baseline
 * schema sets it), so it does what autovacuum would as soon as autovacuum would want to.
 * Counted by {@code durable.maintenance.vacuumed} (a VACUUM that skipped its table for a lock
 * counts too; the next tick looks again).
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

    public Vacuumer(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, VacuumSql sql) {
        super("vacuumer", options, lane, timer, meters, "durable.maintenance.vacuumed");
        this.sql = sql;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.dead(MIN_DEAD, timeout)
                .flatMapMany(Flux::fromIterable)
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
                    return sql.vacuum(dead.table(), timeout).thenReturn(1L);
                })
                .reduce(0L, Long::sum);
    }

    /** One batch is the whole pass: the next tick looks again. */
    @Override
    protected boolean full(long count) {
        return false;
    }
}
