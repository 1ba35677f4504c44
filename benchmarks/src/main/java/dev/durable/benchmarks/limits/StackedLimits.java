package dev.durable.benchmarks.limits;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.limit.LimiterFactory;
import dev.durable.limit.PostgresLimiter;
import dev.durable.redis.RedisLimiters;
import dev.durable.redis.testing.TestRedis;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 21's stacked-limit benchmark: every job holds a per-tenant token bucket and one global gate,
 * admitted all or nothing, under saturation (a backlog for every tenant far beyond what the limits
 * let through). For each limiter (PostgreSQL, then Redis) on a fresh schema, one engine runs jobs
 * that hold their gate slot for {@code --job-ms}; after a warm-up, each tenant's starts are counted
 * over {@code --seconds}. A LIMITS line per tenant gives the admitted rate against the configured
 * one and the most a bucket can admit over the count (its rate plus its burst spread over the
 * seconds: a bucket may be full when the count starts); a GATE line the most jobs seen running at once against the gate's capacity. Before all or
 * nothing, tokens were taken for rows the gate then refused, so under gate contention a tenant got
 * less than its rate. With {@code --window N}, every job also holds a per-tenant sliding window of N per
 * {@code --window-seconds} (bucket + window + gate, all or nothing); the LIMITS line's bound is then the
 * tighter of the bucket's and the window's (N per window length, plus one window's N when the count starts).
 *
 * <pre>benchmarks/stacked-limits [--seconds 20] [--warmup-seconds 3] [--tenants 4] [--rate 20] [--burst 20]
 *     [--gate 12] [--job-ms 100] [--limiters postgres,redis]
 *     [--window 0] [--window-seconds 5]</pre>
 */
public final class StackedLimits {

    private static final String QUEUE = "stacked";

    public static void main(String[] args) throws Exception {
        double seconds = 20;
        double warmup = 3;
        int tenants = 4;
        double rate = 20;
        int burst = 20;
        int gate = 12;
        int jobMillis = 100;
        List<String> limiters = List.of("postgres", "redis");
        int window = 0;
        double windowSeconds = 5;
        for (int i = 0; i < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--seconds" -> seconds = Double.parseDouble(value);
                case "--warmup-seconds" -> warmup = Double.parseDouble(value);
                case "--tenants" -> tenants = Integer.parseInt(value);
                case "--rate" -> rate = Double.parseDouble(value);
                case "--burst" -> burst = Integer.parseInt(value);
                case "--gate" -> gate = Integer.parseInt(value);
                case "--job-ms" -> jobMillis = Integer.parseInt(value);
                case "--limiters" -> limiters = List.of(value.split(","));
                case "--window" -> window = Integer.parseInt(value);
                case "--window-seconds" -> windowSeconds = Double.parseDouble(value);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        System.out.printf(Locale.ROOT, "# tenants=%d rate=%.1f/s burst=%d gate=%d job_ms=%d seconds=%.0f"
                        + " (the gate alone would admit %.0f/s; the buckets %.0f/s together)%s%n",
                tenants, rate, burst, gate, jobMillis, seconds, gate * 1000.0 / jobMillis, tenants * rate,
                window == 0 ? "" : String.format(Locale.ROOT, "; window=%d per %.0f s per tenant (%.1f/s)", window,
                        windowSeconds, window / windowSeconds));
        for (String limiter : limiters) {
            run(limiter, seconds, warmup, tenants, rate, burst, gate, jobMillis, window, windowSeconds);
        }
        System.exit(0);
    }

    private static void run(String limiter, double seconds, double warmup, int tenants, double rate, int burst,
            int gate, int jobMillis, int window, double windowSeconds) throws Exception {
        TestDatabase db = TestPostgres.newDatabase("stacked_" + limiter);
        LimiterFactory factory = limiter.equals("redis") ? RedisLimiters.redis(TestRedis.uri()) : PostgresLimiter.factory();
        AtomicLongArray starts = new AtomicLongArray(tenants);
        AtomicInteger running = new AtomicInteger();
        AtomicInteger maxRunning = new AtomicInteger();
        boolean[] measuring = {false};
        EngineOptions.Builder builder = EngineOptions.builder().url(db.url()).schema(db.schema()).poolMaxSize(8)
                .handlerScheduler(Schedulers.parallel()).limiter(factory)
                .gate("global", gate).rateLimit("tenant", rate, burst)
                .queue(QueueOptions.builder(QUEUE).concurrency(32).prefetch(16).pollInterval(Duration.ofMillis(20))
                        .maxPollInterval(Duration.ofMillis(50)).build());
        if (window > 0) {
            builder.window("tenant-window", window, Duration.ofMillis((long) (windowSeconds * 1000)));
        }
        EngineOptions options = builder.build();
        DurableEngine engine = DurableEngine.builder(options)
                .register(JobDefinition.of("limited", Integer.class, (Integer tenant) -> Mono.defer(() -> {
                    if (measuring[0]) {
                        starts.incrementAndGet(tenant);
                        maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
                        return Mono.delay(Duration.ofMillis(jobMillis)).doFinally(s -> running.decrementAndGet()).then();
                    }
                    return Mono.delay(Duration.ofMillis(jobMillis)).then();
                })).queue(QUEUE))
                .build();
        engine.start().block(Duration.ofMinutes(1));
        // Twice what the buckets let through over the whole run, for every tenant: always a backlog.
        int perTenant = (int) Math.ceil(rate * (seconds + warmup) * 2) + burst;
        List<JobRequest> requests = new ArrayList<>();
        for (int n = 0; n < perTenant; n++) {
            for (int t = 0; t < tenants; t++) {
                JobRequest request = JobRequest.of("limited", t).gate("global", "").rateLimit("tenant", 1, "t" + t);
                requests.add(window > 0 ? request.window("tenant-window", 1, "t" + t) : request);
            }
        }
        Flux.fromIterable(requests).buffer(1000).concatMap(engine::insertAll).blockLast(Duration.ofMinutes(5));
        Thread.sleep((long) (warmup * 1000));
        measuring[0] = true;
        long began = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        measuring[0] = false;
        double elapsed = (System.nanoTime() - began) / 1e9;
        // A bucket may hold its burst when the count starts: rate + burst / seconds is the most it can admit.
        double bound = rate + burst / elapsed;
        double configured = rate;
        if (window > 0 && window / windowSeconds < rate) {
            // The window is the tighter limit: N per length, and a whole N may fall in the count's first window.
            configured = window / windowSeconds;
            bound = Math.min(bound, configured + window / elapsed);
        }
        double total = 0;
        for (int t = 0; t < tenants; t++) {
            double admitted = starts.get(t) / elapsed;
            total += admitted;
            System.out.printf(Locale.ROOT, "LIMITS limiter=%s tenant=t%d admitted_per_s=%.1f configured_per_s=%.1f"
                    + " bound_per_s=%.1f ratio=%.3f%n", limiter, t, admitted, configured, bound, admitted / configured);
        }
        System.out.printf(Locale.ROOT, "LIMITS limiter=%s tenant=all admitted_per_s=%.1f configured_per_s=%.1f"
                + " bound_per_s=%.1f ratio=%.3f%n", limiter, total, configured * tenants, bound * tenants,
                total / (configured * tenants));
        System.out.printf(Locale.ROOT, "GATE limiter=%s max_running=%d capacity=%d%n", limiter, maxRunning.get(), gate);
        engine.closeLater().block(Duration.ofMinutes(1));
    }
}
