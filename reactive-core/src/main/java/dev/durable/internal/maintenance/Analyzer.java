package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.StatisticsSql;
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
 * The analyzer: ANALYZEs a hot table whose planner statistics are behind its contents (at least
 * {@link #MIN_ROWS} live rows and more than {@link #GROWTH} times what its statistics say), so the
 * generic plans the engine's prepared picks and commits keep are made again for the table's size.
 * Without it a plan made while the table looked empty (a fresh install, a queue drained and analyzed
 * empty) scans the whole table on each pick and commit once a backlog arrives, until autoanalyze
 * comes by (a minute, or never with autovacuum off for the table). Each tick costs one catalog query;
 * a table is analyzed only when it grew past twice its statistics, a few times while a backlog builds
 * and not at all in a steady state, far less often than autoanalyze. Counted by
 * {@code durable.maintenance.analyzed} (an ANALYZE that skipped its table for a lock counts too; the
 * table still looks stale on the next tick).
 *
 * <p>A table this role may not ANALYZE (not its owner, no MAINTAIN) is reported once, at WARN, and
 * left to autovacuum; the pass does not fail.
 *
 * <p><b>Safe on all nodes</b>: {@code ANALYZE (SKIP_LOCKED)} skips a table another node (or
 * autovacuum) is analyzing, and a table just analyzed elsewhere no longer looks stale.
 */
public final class Analyzer extends MaintenanceService {

    private static final Logger log = Loggers.getLogger(Analyzer.class);

    /** Below this a plan kept from an empty table costs a few milliseconds at most. */
    static final long MIN_ROWS = 1_000;
    static final double GROWTH = 2.0;

    private final StatisticsSql sql;
    private final Set<String> refused = ConcurrentHashMap.newKeySet();

    public Analyzer(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, StatisticsSql sql) {
        super("analyzer", options, lane, timer, meters, "durable.maintenance.analyzed");
        this.sql = sql;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.stale(MIN_ROWS, GROWTH, timeout)
                .flatMapMany(Flux::fromIterable)
                .concatMap(stale -> {
                    if (!stale.mayAnalyze()) {
                        if (refused.add(stale.table())) {
                            log.warn("maintenance task analyzer: role {} may not ANALYZE {} (its owner may, or a role"
                                    + " with MAINTAIN on PostgreSQL 17), so its statistics are left to autovacuum"
                                    + " and the engine's cached plans may scan it until then; turn the task off with"
                                    + " EngineOptions.Builder.analyzer to silence this", stale.role(),
                                    sql.qualified(stale.table()));
                        }
                        return Mono.empty();
                    }
                    return sql.analyze(stale.table(), timeout).thenReturn(1L);
                })
                .reduce(0L, Long::sum);
    }

    /** One batch is the whole pass: the next tick looks again. */
    @Override
    protected boolean full(long count) {
        return false;
    }
}
