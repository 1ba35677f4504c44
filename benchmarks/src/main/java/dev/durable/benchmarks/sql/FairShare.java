package dev.durable.benchmarks.sql;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Fairness;
import dev.durable.JobDefinition;
import dev.durable.QueueOptions;
import dev.durable.internal.sql.FairPickSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 21's fairness benchmarks.
 *
 * <p>{@code shares}: an engine runs a fair queue (weights gold 3, silver 2, bronze 1) saturated by a
 * backlog of each, and prints each tenant's share of the completions per window (10 s); at
 * {@code --late-at} seconds a fourth tenant ("late", weight 1) arrives with a backlog of its own, and
 * the benchmark prints when it completed its first job and when its share over the last second
 * first reached 80 % of its due share (1/7).
 *
 * <p>{@code tenants}: the pick of a fair queue whose 10,000 tenants are all parked but one, which
 * holds {@code --rows} (1M) runnable rows; one job of another tenant arrives at a time and the
 * engine's pick (32 rows) runs until it is claimed. Prints the start latency (insert to claim, as the
 * client sees it) p50/p99 and the most picks any arrival needed, beside the same on an uncontended
 * fair queue and an uncontended plain queue.
 *
 * <pre>benchmarks/fair-share shares [--rows 100000] [--seconds 60] [--late-at 30] [--concurrency 16]
 * benchmarks/fair-share tenants [--rows 1000000] [--tenants 10000] [--arrivals 300]</pre>
 */
public final class FairShare {

    private static final Duration WAIT = Duration.ofMinutes(10);

    private FairShare() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "shares";
        Map<String, Integer> options = new LinkedHashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            options.put(args[i].replace("--", ""), Integer.parseInt(args[i + 1]));
        }
        switch (mode) {
            case "shares" -> shares(options.getOrDefault("rows", 100_000), options.getOrDefault("seconds", 60),
                    options.getOrDefault("late-at", 30), options.getOrDefault("concurrency", 16));
            case "tenants" -> tenants(options.getOrDefault("rows", 1_000_000), options.getOrDefault("tenants", 10_000),
                    options.getOrDefault("arrivals", 300));
            default -> throw new IllegalArgumentException("mode is shares or tenants, was " + mode);
        }
        System.exit(0);
    }

    static void shares(int rows, int seconds, int lateAt, int concurrency) throws InterruptedException {
        Map<String, AtomicLong> done = new ConcurrentHashMap<>();
        for (String tenant : List.of("gold", "silver", "bronze", "late")) {
            done.put(tenant, new AtomicLong());
        }
        AtomicLong lateFirst = new AtomicLong();
        try (TestDatabase database = TestPostgres.newDatabase("fair_shares")) {
            EngineOptions options = EngineOptions.builder().url(database.url()).schema(database.schema())
                    .poolMaxSize(8)
                    .queue(QueueOptions.builder("fair").concurrency(concurrency).prefetch(concurrency)
                            .minDemand(Math.max(1, concurrency / 2))
                            .fairness(Fairness.builder().weights(Map.of("gold", 3, "silver", 2, "bronze", 1)).build())
                            .build())
                    .build();
            DurableEngine engine = DurableEngine.builder(options)
                    .register(JobDefinition.of("work", String.class, (String tenant) -> {
                        if (done.get(tenant).incrementAndGet() == 1 && tenant.equals("late")) {
                            lateFirst.set(System.nanoTime());
                        }
                        return Mono.<Void>empty();
                    }).queue("fair"))
                    .build();
            engine.migrate().block(WAIT);
            for (String tenant : List.of("gold", "silver", "bronze")) {
                backlog(database, tenant, rows);
            }
            database.execute("VACUUM ANALYZE \"" + database.schema() + "\".durable_instances");
            engine.start().block(WAIT);
            long start = System.nanoTime();
            long lateInserted = 0;
            long lateShareAt = 0;
            Map<String, Long> windowStart = snapshot(done);
            List<Map<String, Long>> lastSecond = new ArrayList<>();
            for (int tick = 1; tick <= seconds * 10; tick++) {
                Thread.sleep(100);
                Map<String, Long> now = snapshot(done);
                lastSecond.add(now);
                if (lastSecond.size() > 11) {
                    lastSecond.remove(0);
                }
                if (tick == lateAt * 10) {
                    backlog(database, "late", rows / 3);
                    lateInserted = System.nanoTime();
                    System.out.printf(Locale.ROOT, "LATE arrived t=%ds rows=%d%n", lateAt, rows / 3);
                }
                if (lateInserted != 0 && lateShareAt == 0 && lastSecond.size() == 11) {
                    Map<String, Long> then = lastSecond.get(0);
                    long total = now.values().stream().mapToLong(Long::longValue).sum()
                            - then.values().stream().mapToLong(Long::longValue).sum();
                    long late = now.get("late") - then.get("late");
                    if (total > 0 && late >= 0.8 * total / 7) {
                        lateShareAt = System.nanoTime();
                        System.out.printf(Locale.ROOT, "LATE first_completion_ms=%d share_80pct_of_due_ms=%d%n",
                                (lateFirst.get() - lateInserted) / 1_000_000, (lateShareAt - lateInserted) / 1_000_000);
                    }
                }
                if (tick % 100 == 0) {
                    long total = 0;
                    for (String tenant : now.keySet()) {
                        total += now.get(tenant) - windowStart.get(tenant);
                    }
                    StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "WINDOW t=%ds completions=%d",
                            (System.nanoTime() - start) / 1_000_000_000L, total));
                    for (String tenant : now.keySet()) {
                        long n = now.get(tenant) - windowStart.get(tenant);
                        line.append(String.format(Locale.ROOT, " %s=%.1f%%", tenant, total == 0 ? 0 : 100.0 * n / total));
                    }
                    System.out.println(line);
                    windowStart = now;
                }
            }
            engine.closeLater().block(WAIT);
        }
    }

    private static Map<String, Long> snapshot(Map<String, AtomicLong> done) {
        Map<String, Long> copy = new LinkedHashMap<>();
        for (String tenant : List.of("gold", "silver", "bronze", "late")) {
            copy.put(tenant, done.get(tenant).get());
        }
        return copy;
    }

    private static void backlog(TestDatabase database, String tenant, int rows) {
        database.execute("INSERT INTO \"" + database.schema() + "\".durable_instances (type, queue, step, state,"
                + " max_attempts, fairness_key, eligible_at) SELECT 'work', 'fair', 'run', to_jsonb('" + tenant
                + "'::text), 20, '" + tenant + "', now() - interval '1 second' FROM generate_series(1, " + rows + ")");
    }

    static void tenants(int rows, int tenants, int arrivals) {
        try (BenchDatabase db = new BenchDatabase("fair_tenants")) {
            db.execute("INSERT INTO " + db.instances() + " (type, queue, step, state, max_attempts, fairness_key,"
                    + " eligible_at) SELECT 'noop', 'crowded', 'run', to_jsonb(g), 20, 'whale',"
                    + " now() - interval '1 hour' FROM generate_series(1, " + rows + ") AS g");
            for (String queue : List.of("crowded", "calm")) {
                db.execute("INSERT INTO " + db.tables.table("durable_fair_keys") + " (queue, fairness_key, pass, active)"
                        + " SELECT '" + queue + "', 't' || g, 0, false FROM generate_series(1, " + (tenants - 1) + ") AS g");
            }
            db.execute("VACUUM ANALYZE " + db.instances());
            db.execute("VACUUM ANALYZE " + db.tables.table("durable_fair_keys"));
            FairPickSql.FairShare equal = new FairPickSql.FairShare(new String[0], new Double[0], 1);
            if (Boolean.getBoolean("explain")) {
                db.execute("INSERT INTO " + db.instances() + " (type, queue, step, state, max_attempts, fairness_key)"
                        + " VALUES ('noop', 'crowded', 'run', '0', 20, 't1')");
                String pick = db.statements.picks().fairPickText().replace("$10", "ARRAY[]::text[]").replace("$11", "NULL::int")
                        .replace("$1", "'crowded'").replace("$2", "32")
                        .replace("$3", "'w'").replace("$4", "30000").replace("$5", "ARRAY['noop']")
                        .replace("$6", "ARRAY[1]").replace("$7", "ARRAY[]::text[]").replace("$8", "ARRAY[]::float8[]")
                        .replace("$9", "1");
                PickShape.explain(db.admin(), pick).forEach(System.out::println);
                PickShape.explain(db.admin(), pick).forEach(System.out::println);
            }
            Latencies crowded = arrivals(db, "crowded", tenants, arrivals, equal);
            Latencies calm = arrivals(db, "calm", tenants, arrivals, equal);
            Latencies plain = arrivals(db, "plain", tenants, arrivals, null);
            for (Latencies l : List.of(crowded, calm, plain)) {
                System.out.printf(Locale.ROOT, "START queue=%s arrivals=%d p50_us=%d p99_us=%d max_picks=%d%n",
                        l.queue, l.micros.length, l.micros[l.micros.length / 2],
                        l.micros[Math.min(l.micros.length - 1, l.micros.length * 99 / 100)], l.maxPicks);
            }
        }
    }

    private record Latencies(String queue, long[] micros, int maxPicks) {
    }

    /** One job of a tenant arrives, then picks run until it is claimed; the time from insert to claim. */
    private static Latencies arrivals(BenchDatabase db, String queue, int tenants, int arrivals,
            FairPickSql.FairShare fair) {
        Connection admin = db.admin();
        long[] micros = new long[arrivals];
        int maxPicks = 0;
        for (int i = 0; i < arrivals + 20; i++) {
            String key = fair == null ? "NULL" : "'t" + (1 + i % (tenants - 1)) + "'";
            long start = System.nanoTime();
            long id = Flux.from(admin.createStatement("INSERT INTO " + db.instances() + " (type, queue, step, state,"
                            + " max_attempts, fairness_key) VALUES ('noop', '" + queue + "', 'run', '0', 20, " + key
                            + ") RETURNING id").execute())
                    .concatMap(result -> result.map(row -> row.get(0, Long.class))).blockLast(WAIT);
            int picks = 0;
            boolean claimed = false;
            while (!claimed) {
                picks++;
                List<ClaimedRow> rows = db.statements.picks().pick(queue, 32, BenchDatabase.WORKER,
                        BenchDatabase.LEASE_MILLIS, fair).block(WAIT).rows();
                claimed = rows.stream().anyMatch(row -> row.id() == id);
                if (picks > 1000) {
                    throw new IllegalStateException("arrival " + id + " not claimed in 1000 picks");
                }
            }
            if (i >= 20) { // the first 20 warm up
                micros[i - 20] = (System.nanoTime() - start) / 1000;
                maxPicks = Math.max(maxPicks, picks);
            }
        }
        Arrays.sort(micros);
        return new Latencies(queue, micros, maxPicks);
    }
}
