package dev.durable.internal.admin;

import dev.durable.EngineOptions;
import dev.durable.Limits;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.GateUsage;
import dev.durable.admin.LimitUsage;
import dev.durable.admin.RateBucket;
import dev.durable.admin.WindowUsage;
import dev.durable.internal.sql.LimitUsageSql;
import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterUnavailableException;
import dev.durable.limit.PermitSlots;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import reactor.core.publisher.Mono;

/**
 * The admin's view of the limits ({@link DurableAdmin#limits}): the gates' claims per key counted from
 * the rows with the permits the limiter keeps to itself added, and, under the PostgreSQL limiter, its
 * token buckets and sliding windows; each list cut at {@link DurableAdmin#LIMIT_ROWS}.
 */
final class LimitUsages {

    /** The default limiter factory's name (PostgresLimiter.factory()); another keeps its buckets to itself. */
    private static final String POSTGRES_LIMITER = "postgres";
    private static final int LIMIT_ROWS = DurableAdmin.LIMIT_ROWS;
    private static final reactor.util.Logger log = reactor.util.Loggers.getLogger(LimitUsages.class);

    private final EngineCalls engine;
    private final LimitUsageSql sql;

    LimitUsages(EngineCalls engine, LimitUsageSql sql) {
        this.engine = engine;
        this.sql = sql;
    }

    /** The usage now; the caller waits for the engine to be open first. */
    Mono<LimitUsage> read() {
        EngineOptions options = engine.options();
        String limiter = String.valueOf(options.limiter());
        boolean bucketsHere = POSTGRES_LIMITER.equals(limiter);
        Mono<List<GateUsage>> gates = sql.gateUsage(options.gates().values(), LIMIT_ROWS + 1).collectList()
                .zipWith(limiterPermits(), (rows, permits) -> withPermits(rows, permits, options.gates()));
        Mono<List<RateBucket>> buckets = bucketsHere
                ? sql.buckets(options.rateLimits().values(), LIMIT_ROWS + 1).collectList()
                : Mono.just(List.of());
        Mono<List<WindowUsage>> windows = bucketsHere
                ? sql.windows(options.windows().values(), LIMIT_ROWS + 1).collectList()
                : Mono.just(List.of());
        return Mono.zip(gates, buckets, windows).map(all -> new LimitUsage(
                first(all.getT1(), LIMIT_ROWS), all.getT1().size() > LIMIT_ROWS,
                first(all.getT2(), LIMIT_ROWS), all.getT2().size() > LIMIT_ROWS, !bucketsHere, limiter,
                first(all.getT3(), LIMIT_ROWS), all.getT3().size() > LIMIT_ROWS));
    }

    /** The slots of permits the limiter keeps to itself (Redis); none while the engine is not running. */
    private Mono<List<PermitSlots>> limiterPermits() {
        return Mono.defer(() -> {
            Limiter current = engine.runningLimiter();
            return current == null ? Mono.just(List.<PermitSlots>of()) : current.permitSlots(LIMIT_ROWS + 1)
                    // The rows the database counts are still worth showing while the limiter is away.
                    .onErrorResume(LimiterUnavailableException.class, error -> {
                        log.debug("limits(): the limiter's permits left out ({})", error.toString());
                        return Mono.just(List.of());
                    });
        });
    }

    /**
     * The keys the database counts with the limiter's permit slots added, busiest first again. Each side
     * is its own top {@link #LIMIT_ROWS} + 1, so past that many keys the order of the merged tail is
     * approximate (a key just outside one side's top misses that side's count).
     */
    private static List<GateUsage> withPermits(List<GateUsage> rows, List<PermitSlots> permits,
            Map<String, Limits.Gate> gates) {
        if (permits.isEmpty()) {
            return rows;
        }
        Map<List<String>, GateUsage> merged = new LinkedHashMap<>();
        rows.forEach(row -> merged.put(List.of(row.gate(), row.key()), row));
        for (PermitSlots held : permits) {
            Limits.Gate gate = gates.get(held.gate());
            merged.merge(List.of(held.gate(), held.key()),
                    new GateUsage(held.gate(), held.key(), held.slots(), gate == null ? null : gate.capacity()),
                    (row, extra) -> new GateUsage(row.gate(), row.key(), row.held() + extra.held(), row.capacity()));
        }
        return merged.values().stream()
                .sorted(Comparator.comparingLong(GateUsage::held).reversed()
                        .thenComparing(GateUsage::gate).thenComparing(GateUsage::key))
                .toList();
    }

    private static <T> List<T> first(List<T> rows, int size) {
        return rows.size() > size ? rows.subList(0, size) : rows;
    }
}
