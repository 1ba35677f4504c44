package dev.durable.sync.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The sync scheduler's meters and its record of the last successful pull per (partner, shard).
 * Tags are bounded: partner (the cluster's nodes), outcome, reason, kind; never the shard, whose
 * count may be large, so per-shard lag is an accessor and the gauge is per partner.
 */
public final class SyncMeters {

    public static final String TICKS = "durable.sync.ticks";
    public static final String PULLS = "durable.sync.pulls";
    public static final String SKIPPED = "durable.sync.skipped";
    public static final String RESTARTS = "durable.sync.restarts";
    public static final String PASS = "durable.sync.pass";
    public static final String LAG = "durable.sync.lag";

    private final MeterRegistry registry;
    private final LongSupplier clockMillis;
    private final Counter ticks;
    private final Counter restarts;
    /** partner -> shard -> epoch millis of its last successful pull. */
    private final Map<String, Map<Integer, Long>> lastSuccess = new ConcurrentHashMap<>();

    /** A null registry means none: a composite with no children, whose meters are no-ops. */
    public SyncMeters(@Nullable MeterRegistry registry, LongSupplier clockMillis) {
        this.registry = registry != null ? registry : new CompositeMeterRegistry();
        this.clockMillis = clockMillis;
        this.ticks = Counter.builder(TICKS).description("Sync scheduler ticks, run or skipped")
                .register(this.registry);
        this.restarts = Counter.builder(RESTARTS).description("Restarts of a crashed sync tick loop")
                .register(this.registry);
    }

    public void tick() {
        ticks.increment();
    }

    public void restarted() {
        restarts.increment();
    }

    public void skipped(String reason, long count) {
        if (count > 0) {
            Counter.builder(SKIPPED).description("Sync ticks, pulls or partners skipped, by reason")
                    .tag("reason", reason).register(registry).increment(count);
        }
    }

    public void pass(String kind, Duration duration) {
        Timer.builder(PASS).description("Duration of one sync pass").tag("kind", kind)
                .register(registry).record(duration);
    }

    public void pullSucceeded(String partner, int shard) {
        pull(partner, "success");
        Map<Integer, Long> shards = lastSuccess.computeIfAbsent(partner, key -> {
            Map<Integer, Long> created = new ConcurrentHashMap<>();
            // The map is held here, so the gauge's weak reference to it stays valid.
            Gauge.builder(LAG, created, this::lagSeconds).description("Seconds since the least recently"
                            + " synced shard of a partner was last pulled successfully")
                    .tag("partner", partner).baseUnit("seconds").register(registry);
            return created;
        });
        shards.put(shard, clockMillis.getAsLong());
    }

    public void pullFailed(String partner) {
        pull(partner, "failure");
    }

    private void pull(String partner, String outcome) {
        Counter.builder(PULLS).description("Sync pulls triggered, by partner and outcome")
                .tag("outcome", outcome).tag("partner", partner).register(registry).increment();
    }

    private double lagSeconds(Map<Integer, Long> shards) {
        long oldest = shards.values().stream().mapToLong(Long::longValue).min().orElse(clockMillis.getAsLong());
        return (clockMillis.getAsLong() - oldest) / 1000.0;
    }

    /** Epoch millis of the last successful pull of {@code shard} from {@code partner}, or null. */
    public @Nullable Long lastSuccessMillis(String partner, int shard) {
        Map<Integer, Long> shards = lastSuccess.get(partner);
        return shards == null ? null : shards.get(shard);
    }

    /** Every (partner, shard) pulled successfully so far, with its epoch millis. */
    public Map<String, Map<Integer, Long>> lastSuccesses() {
        return lastSuccess;
    }
}
