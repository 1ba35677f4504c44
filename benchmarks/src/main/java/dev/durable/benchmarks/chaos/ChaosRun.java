package dev.durable.benchmarks.chaos;

import dev.durable.Definition;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobRequest;
import dev.durable.NoTargetException;
import dev.durable.poke.PokeTransports;
import dev.durable.redis.RedisPokeTransports;
import dev.durable.redis.testing.TestRedis;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.support.Jvms;
import dev.durable.support.TcpProxy;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** One chaos run: set-up, load and faults, recovery, the checks, and the cleanup. */
final class ChaosRun implements AutoCloseable {

    /** How long a live owner is kept away: past its lease, and a bit. */
    private static final Duration HOLD = Chaos.LEASE.plusMillis(2500);
    /** A stall: past the call timeout (the callers give up), then until the rows came back and were claimed again. */
    private static final Duration STALL = Chaos.CALL_TIMEOUT.plusSeconds(10);
    /** Every worker JVM incarnation: they share one proxy, and one may replace another during a fault. */
    private static final String JVM_PATTERN = "jvm%";
    /** The gate key a Redis restart holds a slot of while Redis is down (a key of its own: no burst's). */
    private static final String RESTART_GATE_KEY = "gr";
    /** The end of the label of a worker JVM that runs the previous jar. */
    private static final String PREVIOUS_JAR_SUFFIX = "-previous";
    /** However the backlog moves, the recovery ends after this long. */
    private static final Duration RECOVERY_CAP = Duration.ofMinutes(60);
    /** After a fault's window, how long its engine may still run a row it lost without breaking stale_start. */
    private static final Duration GRACE = Duration.ofSeconds(15);

    /** An in-process engine slot, behind its own proxy: replaced by a new incarnation when ENGINE strikes it. */
    private static final class Slot {
        final int index;
        final TcpProxy proxy;
        final Chaos.Pokes pokes;
        int generation;
        String label = "";
        @Nullable DurableEngine engine;
        @Nullable ConnectionPool pool;

        Slot(int index, TcpProxy proxy, Chaos.Pokes pokes) {
            this.index = index;
            this.proxy = proxy;
            this.pokes = pokes;
        }

        /** Every incarnation of this slot: they share its proxy. */
        String pattern() {
            return "e" + index + "g%";
        }
    }

    private final Chaos.Config config;
    private final Consumer<String> log;
    private final Path work;
    private final ChaosServer server;
    private final @Nullable TestRedisServer redis;
    private final String schema = "chaos_" + ProcessHandle.current().pid() + "_" + (System.nanoTime() % 100_000);
    private final ConnectionPool harness;
    private final ConnectionPool producerPool;
    private final DurableEngine producer;
    private final ConnectionPool signallerPool;
    private final DurableEngine signaller;
    private final List<Slot> slots = new ArrayList<>();
    private final List<DurableEngine> zombies = new CopyOnWriteArrayList<>();
    private final List<Long> recentIds = new CopyOnWriteArrayList<>();
    private final List<Long> recentFlows = new CopyOnWriteArrayList<>();
    private final TcpProxy jvmProxy;
    private final Object jvmLock = new Object();
    private @Nullable Process jvm;
    private String jvmLabel = "";
    private int jvmCount;
    private volatile boolean loading = true;
    private final Map<String, AtomicLong> counters = new ConcurrentSkipListMap<>();
    private final Map<String, Long> faults = new LinkedHashMap<>();
    private final List<String> notes = new CopyOnWriteArrayList<>();
    private final List<Report.Minute> minutes = new CopyOnWriteArrayList<>();
    private final long loadStarted = System.nanoTime();

    static Report execute(Chaos.Config config, Consumer<String> log) {
        Path work;
        try {
            work = Files.createTempDirectory("durable-chaos-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Report report = null;
        try (ChaosRun run = new ChaosRun(config, log, work)) {
            report = run.run();
            return report;
        } finally {
            // The run's files are kept for a failed run only (said in the report's details).
            if (report != null && !report.kept()) {
                deleteRecursively(work);
            }
        }
    }

    private ChaosRun(Chaos.Config config, Consumer<String> log, Path work) {
        this.config = config;
        this.log = log;
        this.work = work;
        this.server = ChaosServer.start(work);
        this.redis = config.redis() ? TestRedis.server() : null;
        this.harness = Chaos.pool(server.url, Chaos.HARNESS_APP, 16);
        this.producerPool = Chaos.pool(server.url, Chaos.ENGINE_APP, 6);
        this.signallerPool = Chaos.pool(server.url, Chaos.ENGINE_APP, 4);
        // The producer's inserts poke the other engines over NOTIFY; the signaller's signals over Redis.
        // With --skew the producer runs the second release (it inserts version 2 flows), the signaller
        // the first (it inserts every other flow, at version 1).
        this.producer = client(producerPool, "chaos-producer", PokeTransports.postgresNotify(), true,
                config.skew() ? 2 : 1);
        this.signaller = client(signallerPool, "chaos-signaller", redis != null
                ? RedisPokeTransports.redis(redis.uri()) : PokeTransports.postgresNotify(), false, 1);
        this.jvmProxy = TcpProxy.forUrl(server.url);
    }

    private DurableEngine client(ConnectionPool pool, String name, dev.durable.poke.PokeTransportFactory pokes,
            boolean migrates, int generation) {
        DurableEngine.Builder builder = DurableEngine.builder(EngineOptions.builder().connectionFactory(pool)
                .schema(schema).name(name).runMaintenance(false).applyMigrations(migrates).pokeTransport(pokes)
                .gate(ChaosWorkload.GATE, ChaosWorkload.GATE_CAPACITY)
                .rateLimit(ChaosWorkload.RATE, ChaosWorkload.RATE_PER_SECOND, ChaosWorkload.RATE_BURST)
                .window(ChaosWorkload.WINDOW, ChaosWorkload.WINDOW_LIMIT, ChaosWorkload.WINDOW_LENGTH).build());
        for (Definition definition : new ChaosWorkload(name, harness, schema, false, config.burn(), generation)
                .definitions()) {
            builder.register(definition);
        }
        return builder.build();
    }

    private void tally(String counter, long n) {
        counters.computeIfAbsent(counter, c -> new AtomicLong()).addAndGet(n);
    }

    private long counter(String counter) {
        AtomicLong value = counters.get(counter);
        return value == null ? 0 : value.get();
    }

    private Report run() {
        log.accept("chaos: schema " + schema + " on " + (server.restartable() ? "a dedicated embedded PostgreSQL"
                : "DURABLE_PG_URL") + (redis != null ? " with Redis " + redis.uri() : "") + "; work directory "
                + work + "; " + (config.rounds() == Integer.MAX_VALUE ? "load " + config.load()
                        : config.rounds() + " round(s) of " + config.kinds()) + ", a fault every " + config.faultEvery());
        producer.start().block(Duration.ofSeconds(60)); // applies the migrations
        signaller.start().block(Duration.ofSeconds(60));
        Chaos.execute(harness, ChaosSchema.ddl(schema));
        List<Chaos.Pokes> pokes = redis != null ? List.of(Chaos.Pokes.LOCAL, Chaos.Pokes.NOTIFY, Chaos.Pokes.REDIS)
                : List.of(Chaos.Pokes.LOCAL, Chaos.Pokes.NOTIFY);
        for (int i = 0; i < config.engines(); i++) {
            Slot slot = new Slot(i, TcpProxy.forUrl(server.url), pokes.get(i % pokes.size()));
            slots.add(slot);
            startSlot(slot);
        }
        startJvm();
        if (!server.restartable()) {
            note("PostgreSQL restarts and crashes replaced by terminations: DURABLE_PG_URL is not ours to restart");
        }
        if (redis != null && !redis.isEmbedded()) {
            note("Redis restarts skipped: DURABLE_REDIS_URL is not ours to restart");
        }

        List<Thread> threads = List.of(
                loop("chaos-insert", 100, this::insertSome),
                loop("chaos-signal", 50, this::signalOrCancel),
                loop("chaos-sample", 250, this::sample),
                loop("chaos-minute", 60_000, this::sampleMinute),
                loop("chaos-jvm-watch", 500, this::watchJvm));
        threads.forEach(Thread::start);
        long started = System.nanoTime();
        long loadEnd = started + config.load().toNanos();
        List<Fault> round = config.kinds();
        int injected = 0;
        long progressAt = System.nanoTime();
        while (System.nanoTime() < loadEnd && injected < config.faults() && !round.isEmpty()) {
            Chaos.sleep(config.faultEvery().toMillis());
            if (System.nanoTime() >= loadEnd) {
                break;
            }
            Fault fault = round.get(injected++ % round.size());
            try {
                inject(fault);
            } catch (RuntimeException e) {
                tally("fault errors", 1);
                log.accept("chaos: fault " + fault + " failed: " + e);
            }
            if (System.nanoTime() - progressAt > TimeUnit.SECONDS.toNanos(30)) {
                progressAt = System.nanoTime();
                log.accept("chaos: " + injected + " faults; " + counters);
            }
        }
        loading = false;
        for (Thread thread : threads) {
            try {
                thread.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        // The last worker JVM dies like the others; a new one finishes its queue.
        if (config.kinds().contains(Fault.JVM_KILL)) {
            fault(Fault.JVM_KILL, JVM_PATTERN, this::killAndRestartJvm);
        }

        OffsetDateTime recoveryStart = OffsetDateTime.now(ZoneOffset.UTC);
        String nonTerminal = ChaosSchema.render("SELECT count(*) FROM S.durable_instances"
                + " WHERE status NOT IN ('done', 'failed', 'cancelled') AND inserted_at < $1", schema);
        long backlog = countSafely(nonTerminal, recoveryStart);
        log.accept("chaos: load over after " + TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started)
                + " s, recovering " + backlog + " rows (until none is left, or none settles for " + config.recovery() + ")");
        // The recovery's deadline is one of progress, not of time: a backlog an overloaded machine
        // built drains at the rate its limits and keys allow (each flow key runs one step at a time),
        // however long that takes; rows that stay are those that stopped moving.
        long recoveryStarted = System.nanoTime();
        long lastProgress = recoveryStarted;
        long lastLog = recoveryStarted;
        long cap = recoveryStarted + RECOVERY_CAP.toNanos();
        while (backlog > 0 && System.nanoTime() - lastProgress < config.recovery().toNanos() && System.nanoTime() < cap) {
            watchJvm();
            Chaos.sleep(500);
            long now = countSafely(nonTerminal, recoveryStart);
            if (now < backlog) {
                backlog = now;
                lastProgress = System.nanoTime();
            }
            if (System.nanoTime() - lastLog > TimeUnit.SECONDS.toNanos(30)) {
                lastLog = System.nanoTime();
                log.accept("chaos: recovering, " + backlog + " rows left");
            }
        }
        note("recovered for " + TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - recoveryStarted) + " s");
        closeEngines();
        return check(recoveryStart);
    }

    private void note(String note) {
        notes.add(note);
        log.accept("chaos: " + note);
    }

    // ---- the checks ---------------------------------------------------------------------------

    private Report check(OffsetDateTime recoveryStart) {
        // Settled rows live in the history (or, their correlation key still occupied, in the hot table).
        long jobs = count("SELECT count(*) FROM S.durable_instances_all");
        long terminal = count("SELECT count(*) FROM S.durable_instances_all WHERE status IN ('done', 'failed', 'cancelled')");
        long executions = count("SELECT count(*) FROM S.chaos_exec");
        long duplicates = count(ChaosSchema.duplicates(schema));
        Map<String, Long> invariants = new LinkedHashMap<>();
        invariants.put("stale_commit", count(ChaosSchema.staleCommits(schema)));
        invariants.put("terminal_changed", count(ChaosSchema.terminalChanged(schema)));
        invariants.put("done_not_once", count(ChaosSchema.doneNotOnce(schema)));
        invariants.put("double_commit", count(ChaosSchema.tokensCommittedTwice(schema))
                + count(ChaosSchema.claimsCommittedTwice(schema)) + count(ChaosSchema.brokenStateSequences(schema)));
        invariants.put("overlap", count(ChaosSchema.intersectingCommits(schema)) + counter("key overlap samples"));
        invariants.put("gate_over", counter("gate over samples"));
        List<long[]> redisRestarts = redisRestarts();
        invariants.put("rate_over", rateOver(redisRestarts));
        invariants.put("window_over", windowOver(redisRestarts));
        invariants.put("early_reap", count(ChaosSchema.earlyRecoveries(schema)));
        invariants.put("cancel_lost", count(ChaosSchema.cancelsLost(schema)));
        invariants.put("taken_running", count(ChaosSchema.takenWhileRunning(schema)));
        invariants.put("stale_start", count(ChaosSchema.staleStarts(schema, GRACE.toMillis())));
        long logged = server.pickRowLockWaits();
        invariants.put("pick_waits", counter("pick wait samples") + Math.max(0, logged));
        invariants.put("over_attempts", count(ChaosSchema.overAttempts(schema)));
        invariants.put("version_skew", count(ChaosSchema.versionSkew(schema)));
        invariants.put("unexpected_failed", count(ChaosSchema.unexpectedFailed(schema)));
        invariants.put("unknown_commits", count(ChaosSchema.unknownTokens(schema)));
        invariants.put("vanished", count(ChaosSchema.vanished(schema)));
        // Key election: an ungated key with runnable or executing rows has exactly one head.
        invariants.put("key_heads", count("SELECT count(*) FROM (SELECT concurrency_key FROM S.durable_instances"
                + " WHERE concurrency_key IS NOT NULL AND gate_name IS NULL AND status IN ('runnable', 'executing')"
                + " GROUP BY concurrency_key HAVING count(*) FILTER (WHERE NOT key_waiting) <> 1) k"));
        // Key election: one that gave up on a held key lock is done again once the lock is free
        // (SkippedKeyElections, every second): none is left after the recovery.
        invariants.put("key_skips", count("SELECT count(*) FROM S.durable_key_skips"));
        // Key election, while it ran: samples that saw an ungated key with waiting rows and neither a
        // head nor an executing row, its election not given up (every transition elects in its statement).
        invariants.put("key_headless", counter("key headless samples"));
        // Signals leave with their instance (a trigger; the collector sweeps any left): none whose
        // instance is gone.
        invariants.put("orphan_signals", count("SELECT count(*) FROM S.durable_signals s"
                + " WHERE NOT EXISTS (SELECT 1 FROM S.durable_instances i WHERE i.id = s.instance_id)"));
        invariants.put("tx_effects", count(ChaosSchema.transactionalEffects(schema)));
        // Live rows never leave the hot table (a settle moves them out): lost and stuck read it alone.
        invariants.put("lost", count(ChaosSchema.render("SELECT count(*) FROM S.durable_instances"
                + " WHERE status NOT IN ('done', 'failed', 'cancelled') AND inserted_at < $1", schema), recoveryStart));
        invariants.put("stuck", count("SELECT count(*) FROM S.durable_instances"
                + " WHERE status = 'executing' AND lease_expires_at < now() AND inserted_at < $1", recoveryStart));
        String statuses = String.join(", ", strings("SELECT status || '=' || count(*) FROM S.durable_instances_all"
                + " GROUP BY status ORDER BY status"));
        String types = String.join(", ", strings("SELECT type || '=' || count(*) FROM S.durable_instances_all"
                + " GROUP BY type ORDER BY type"));
        boolean ok = invariants.values().stream().allMatch(v -> v == 0);
        Map<String, Long> releases = new LinkedHashMap<>();
        if (config.skew()) {
            releases.put("first", count("SELECT count(*) FROM S.chaos_exec WHERE generation = 1"));
            releases.put("second", count("SELECT count(*) FROM S.chaos_exec WHERE generation = 2"));
            releases.put("new_step", count("SELECT count(*) FROM S.chaos_exec WHERE step = '" + ChaosWorkload.AUDIT + "'"));
            if (config.previousJar() != null) {
                releases.put("previous_jar", count("SELECT count(*) FROM S.chaos_exec WHERE label LIKE '%"
                        + PREVIOUS_JAR_SUFFIX + "'"));
            }
            releases.put("migrated", count("SELECT count(DISTINCT a.instance_id) FROM S.chaos_exec a JOIN S.chaos_exec b"
                    + " ON b.instance_id = a.instance_id WHERE a.seen_version = 1 AND b.seen_version = 2"
                    + " AND a.type = '" + ChaosWorkload.FLOW + "'"));
        }
        // Transactional jobs: done and failed ones, their executions whose effect rolled back, and of those
        // the ones whose handler succeeded (rolled back at the commit, a lost claim or a cancel, or with a
        // connection or engine that died before it).
        String[] settled = strings("SELECT count(*) FILTER (WHERE status = 'done') || ',' || count(*) FILTER"
                + " (WHERE status = 'failed') FROM S.durable_instances_all WHERE type IN " + ChaosWorkload.TX_TYPES)
                .get(0).split(",");
        String[] rolledBack = strings("SELECT count(*) || ',' || count(*) FILTER (WHERE x.outcome = 'ok')"
                + " FROM S.chaos_exec x WHERE x.type IN " + ChaosWorkload.TX_TYPES
                + " AND NOT EXISTS (SELECT 1 FROM S.chaos_effects e WHERE e.token = x.token)").get(0).split(",");
        Map<String, Long> transactional = new LinkedHashMap<>();
        transactional.put("done", Long.parseLong(settled[0]));
        transactional.put("failed", Long.parseLong(settled[1]));
        transactional.put("rolled_back", Long.parseLong(rolledBack[0]));
        transactional.put("ok_rolled_back", Long.parseLong(rolledBack[1]));
        if (invariants.get("stale_start") > 0) {
            notes.add("stale starts: " + strings(ChaosSchema.staleStartExamples(schema, GRACE.toMillis()))
                    + "; fault windows: " + strings("SELECT kind || ' ' || COALESCE(label, 'all') || ' '"
                    + " || to_char(started_at, 'HH24:MI:SS:MS') || '-' || to_char(ended_at, 'HH24:MI:SS:MS')"
                    + " FROM S.chaos_faults ORDER BY started_at"));
        }
        if (invariants.get("taken_running") > 0) {
            notes.add("taken while running: " + strings(ChaosSchema.takenWhileRunningExamples(schema)));
        }
        if (invariants.get("early_reap") > 0) {
            notes.add("early recoveries: " + strings(ChaosSchema.earlyRecoveryExamples(schema)));
        }
        if (invariants.get("stale_commit") > 0) {
            notes.add("stale commits: " + strings(ChaosSchema.staleCommitExamples(schema)));
        }
        String details = "chaos details: statuses {" + statuses + "}; types {" + types + "}; faults " + faults
                + "; transitions audited " + count("SELECT count(*) FROM S.chaos_audit")
                + ", reaped " + count("SELECT count(*) FROM S.chaos_audit WHERE reaped")
                + ", recurring runs " + count("SELECT count(*) FROM S.durable_instances_all WHERE correlation_key LIKE"
                        + " 'durable.cron:%'")
                + "; executions that started on a lost claim " + count("SELECT count(*) FROM S.chaos_exec e"
                        + " WHERE e.seen_status IS DISTINCT FROM 'executing' OR e.seen_attempt <> e.attempt")
                + (releases.isEmpty() ? "" : "; releases " + releases) + "; transactional " + transactional
                + "; counters " + counters + (notes.isEmpty() ? "" : "; " + String.join("; ", notes))
                + (ok ? "" : "; the run's files are kept in " + work);
        return new Report(jobs, terminal, executions, duplicates, Map.copyOf(faults), invariants, releases,
                transactional, List.copyOf(minutes), details, work, !ok);
    }

    /**
     * Windows in which the claims of one rate limit and partition took more tokens than the bucket
     * holds: burst + rate × (window + slack). The slack covers the time between an admission (the
     * pick's transaction clock, or Redis's) and the claim's own clock. Windows across a Redis restart
     * are left out: Redis comes back empty, every bucket full again.
     */
    private long rateOver(List<long[]> redisRestarts) {
        return overBudget("rate", ChaosSchema.rateClaims(schema), redisRestarts, Long.MAX_VALUE, (spanMillis, weight) ->
                weight > ChaosWorkload.RATE_BURST + ChaosWorkload.RATE_PER_SECOND * (spanMillis / 1000.0 + slackSeconds()));
    }

    /**
     * Spans shorter than the sliding window (less the same slack) in which the claims of one window
     * partition counted more than its limit: a window is never exceeded over any of its lengths of
     * time. Spans across a Redis restart are left out, as for the buckets.
     */
    private long windowOver(List<long[]> redisRestarts) {
        long span = ChaosWorkload.WINDOW_LENGTH.toMillis() - (long) (slackSeconds() * 1000);
        return overBudget("window", ChaosSchema.windowClaims(schema), redisRestarts, span, (spanMillis, weight) ->
                weight > ChaosWorkload.WINDOW_LIMIT);
    }

    /** The windows of the Redis restarts, epoch ms from and to. */
    private List<long[]> redisRestarts() {
        List<long[]> restarts = new ArrayList<>();
        for (String window : strings("SELECT (extract(epoch FROM started_at) * 1000)::bigint || ',' ||"
                + " (extract(epoch FROM COALESCE(ended_at, now())) * 1000)::bigint FROM S.chaos_faults"
                + " WHERE kind = 'REDIS_RESTART'")) {
            String[] parts = window.split(",");
            restarts.add(new long[] {Long.parseLong(parts[0]), Long.parseLong(parts[1])});
        }
        return restarts;
    }

    private double slackSeconds() {
        return redis != null ? 1.0 : 0.5;
    }

    /** Whether claims of total {@code weight} over {@code spanMillis} break a limit. */
    @FunctionalInterface
    private interface Budget {
        boolean over(long spanMillis, long weight);
    }

    /**
     * Counts the claims (name, partition, weight, epoch ms; from {@code claimsSql}) that begin a span
     * of claims of their partition, shorter than {@code maxSpanMillis}, over {@code budget}, leaving out
     * spans across a Redis restart ({@code restarts}: epoch ms windows).
     */
    private long overBudget(String kind, String claimsSql, List<long[]> restarts, long maxSpanMillis, Budget budget) {
        Map<String, List<long[]>> claims = new LinkedHashMap<>();
        Flux.usingWhen(harness.create(), (Connection c) -> Flux.from(c.createStatement(claimsSql).execute())
                        .flatMap(result -> result.map((row, meta) -> {
                            claims.computeIfAbsent(row.get(0, String.class) + "/" + row.get(1, String.class),
                                    k -> new ArrayList<>()).add(new long[] {row.get(3, Long.class),
                                    row.get(2, Integer.class) == null ? 1 : row.get(2, Integer.class)});
                            return 1;
                        })), Connection::close)
                .blockLast(Duration.ofSeconds(120));
        long over = 0;
        for (Map.Entry<String, List<long[]>> partition : claims.entrySet()) {
            List<long[]> times = partition.getValue();
            times.sort(Comparator.comparingLong(t -> t[0]));
            for (int i = 0; i < times.size(); i++) {
                long weight = 0;
                for (int j = i; j < times.size(); j++) {
                    weight += times.get(j)[1];
                    long from = times.get(i)[0];
                    long to = times.get(j)[0];
                    if (to - from >= maxSpanMillis) {
                        break;
                    }
                    if (budget.over(to - from, weight)) {
                        // Crossing a restart is for good once it starts: checked only when it matters.
                        if (restarts.stream().anyMatch(r -> r[0] <= to && r[1] + 1000 >= from)) {
                            break;
                        }
                        over++;
                        if (over <= 3) {
                            note(kind + " over budget in " + partition.getKey() + ": " + weight + " in "
                                    + (to - from) + " ms");
                        }
                        break;
                    }
                }
            }
        }
        return over;
    }

    private long count(String sql, Object... args) {
        return Chaos.count(harness, ChaosSchema.render(sql, schema), args);
    }

    private long countSafely(String sql, Object... args) {
        try {
            return Chaos.count(harness, ChaosSchema.render(sql, schema), args);
        } catch (RuntimeException e) {
            return Long.MAX_VALUE;
        }
    }

    private List<String> strings(String sql) {
        return Flux.usingWhen(harness.create(), (Connection c) -> Flux.from(c.createStatement(
                                ChaosSchema.render(sql, schema)).execute())
                        .flatMap(result -> result.map((row, meta) -> String.valueOf(row.get(0)))), Connection::close)
                .collectList()
                .block(Duration.ofSeconds(60));
    }

    // ---- workload -----------------------------------------------------------------------------

    private Thread loop(String name, long everyMillis, Runnable body) {
        Thread thread = new Thread(() -> {
            while (loading) {
                try {
                    body.run();
                } catch (RuntimeException e) {
                    tally(name + " errors", 1);
                }
                // In slices, so a slow loop (the minute's) ends with the load, not a minute after.
                for (long slept = 0; slept < everyMillis && loading; slept += 250) {
                    Chaos.sleep(Math.min(250, everyMillis - slept));
                }
            }
        }, name);
        thread.setDaemon(true);
        return thread;
    }

    private final AtomicLong inserts = new AtomicLong();

    private void insertSome() {
        long n = inserts.incrementAndGet();
        int plain = 4 * config.loadFactor();
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < plain; i++) {
            requests.add(ChaosWorkload.randomJob());
        }
        requests.add(ChaosWorkload.randomFlow());
        if (n % 7 == 0) {
            requests.add(ChaosWorkload.deepJob());
        }
        if (n % 30 == 0) {
            requests.add(ChaosWorkload.soloJob(ChaosWorkload.SOLO));
        }
        if (n % 60 == 15) {
            requests.add(ChaosWorkload.soloJob(ChaosWorkload.SOLO_TX));
        }
        requests.addAll(ChaosWorkload.bursts(n));
        if (config.skew() && n % 2 == 0) {
            JobRequest flow = requests.remove(plain);
            remember(recentFlows, insert(signaller, List.of(flow)));
            remember(recentIds, insert(producer, requests).subList(0, plain));
            return;
        }
        List<Long> ids = insert(producer, requests);
        remember(recentIds, ids.subList(0, plain));
        remember(recentFlows, ids.subList(plain, plain + 1));
    }

    private List<Long> insert(DurableEngine client, List<JobRequest> requests) {
        List<Long> ids = client.insertAll(requests).block(Duration.ofSeconds(20));
        tally("inserted", ids.size());
        return ids;
    }

    private static void remember(List<Long> recent, List<Long> ids) {
        recent.addAll(ids);
        while (recent.size() > 200) {
            recent.remove(0);
        }
    }

    private void signalOrCancel() {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        List<Long> pool = random.nextInt(40) == 0 ? recentIds : recentFlows;
        if (pool.isEmpty()) {
            return;
        }
        long id = pool.get(random.nextInt(pool.size()));
        try {
            if (pool == recentIds) {
                signaller.cancel(id, random.nextBoolean()).block(Duration.ofSeconds(20));
                tally("cancels", 1);
            } else {
                signaller.signal(id, ChaosWorkload.GO, Map.of("n", random.nextInt(100)),
                        "go-" + id + "-" + random.nextInt(3)).block(Duration.ofSeconds(20));
                tally("signals", 1);
            }
        } catch (NoTargetException settled) {
            tally("signals to settled", 1);
        }
    }

    private void sample() {
        tally("samples", 1);
        tally("key overlap samples", count(ChaosSchema.keyOverlapSample(schema)));
        long gateOver = count(ChaosSchema.gateOverSample(schema));
        tally("gate over samples", gateOver);
        if (gateOver > 0) {
            note("gate over K: " + String.join(" | ", strings(ChaosSchema.gateOverDetail(schema))));
        }
        tally("pick wait samples", count(ChaosSchema.pickWaitSample(schema)));
        long headless = count(ChaosSchema.keyHeadlessSample(schema));
        tally("key headless samples", headless);
        if (headless > 0) {
            note("headless keys: " + String.join(" | ", strings(ChaosSchema.keyHeadlessDetail(schema))));
        }
    }

    /** Once a minute: this JVM's heap right after a full collection and its threads, the server's connections, the backlog. */
    private void sampleMinute() {
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        memory.gc();
        long heapMb = memory.getHeapMemoryUsage().getUsed() >> 20;
        int threads = ManagementFactory.getThreadMXBean().getThreadCount();
        long engineConnections = count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                + " AND application_name = $1", Chaos.ENGINE_APP);
        long harnessConnections = count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                + " AND application_name = $1", Chaos.HARNESS_APP);
        long backlog = count("SELECT count(*) FROM S.durable_instances WHERE status NOT IN ('done', 'failed', 'cancelled')");
        Report.Minute minute = new Report.Minute((int) TimeUnit.NANOSECONDS.toMinutes(System.nanoTime() - loadStarted),
                heapMb, threads, engineConnections, harnessConnections, backlog);
        minutes.add(minute);
        log.accept("chaos: minute " + minute);
    }

    // ---- faults -------------------------------------------------------------------------------

    private void inject(Fault fault) {
        switch (fault) {
            case TERMINATE -> fault(fault, null, this::terminate);
            case ENGINE -> {
                Slot slot = randomSlot();
                fault(fault, slot.pattern(), () -> replaceEngine(slot));
            }
            case JVM_KILL -> {
                fault(fault, JVM_PATTERN, this::killAndRestartJvm);
                // Then a poison job: its two attempts halt the new JVM twice, then it fails. Inserted
                // here, so its halts never cut a fault on the JVM short.
                insert(producer, List.of(ChaosWorkload.poisonJob()));
            }
            case JVM_STOP -> fault(fault, JVM_PATTERN, this::stopAndContinueJvm);
            case PARTITION -> {
                // The worker JVM and the in-process engines in turn.
                boolean jvmTurn = faults.getOrDefault(fault.name(), 0L) % 2 == 0;
                Slot slot = jvmTurn ? null : randomSlot();
                TcpProxy proxy = jvmTurn ? jvmProxy : slot.proxy;
                fault(fault, jvmTurn ? JVM_PATTERN : slot.pattern(), () -> {
                    proxy.partition();
                    Chaos.sleep(HOLD.toMillis());
                    proxy.heal();
                });
            }
            case STALL -> fault(fault, JVM_PATTERN, () -> {
                // Everything the JVM sends on its open connections is held; for a call timeout it
                // cannot open others, so its calls (commits among them) time out and their runs end;
                // then new connections flow, its lost rows come back to it and it claims them again;
                // then the held statements land, after their callers gave up.
                boolean handshake = armStall();
                jvmProxy.refuseNew(true);
                jvmProxy.freeze();
                Chaos.execute(harness, ChaosSchema.render("UPDATE S.chaos_stall SET frozen = true, armed = false"
                        + " WHERE id = 1", schema));
                tally(handshake ? "stalls with a solo commit held" : "stalls without a solo commit", 1);
                Chaos.sleep(Chaos.CALL_TIMEOUT.toMillis());
                jvmProxy.refuseNew(false);
                // The held commit's row back in the JVM's hands, at a later attempt (or a while).
                long deadline = System.nanoTime() + STALL.minus(Chaos.CALL_TIMEOUT).toNanos();
                while (handshake && System.nanoTime() < deadline && countSafely("SELECT count(*)"
                        + " FROM S.chaos_stall t JOIN S.chaos_exec e ON e.token = t.waiting"
                        + " JOIN S.durable_instances i ON i.id = e.instance_id"
                        + " WHERE i.status = 'executing' AND i.attempt > e.attempt") != 1) {
                    Chaos.sleep(50);
                }
                jvmProxy.thaw();
                if (handshake) {
                    Chaos.sleep(1000);
                    log.accept("chaos: the held commit's row: " + strings("SELECT a.id || ' ' || COALESCE(a.old_status, '-')"
                            + " || '>' || a.new_status || ' ' || a.new_step || ' attempt ' || COALESCE(a.old_attempt::text, '-')"
                            + " || '>' || a.new_attempt || ' by ' || COALESCE(a.old_claimed_by, '-') || '>'"
                            + " || COALESCE(a.new_claimed_by, '-') || ' token ' || COALESCE(a.token, '-') || ' reaped '"
                            + " || a.reaped || ' at ' || to_char(a.at, 'HH24:MI:SS:MS') FROM S.chaos_audit a"
                            + " WHERE a.instance_id = (SELECT e.instance_id FROM S.chaos_exec e JOIN S.chaos_stall t"
                            + " ON t.waiting = e.token) ORDER BY a.id") + "; waiting token " + strings(
                            "SELECT waiting || ' frozen at ' || to_char(clock_timestamp(), 'HH24:MI:SS:MS') FROM S.chaos_stall"));
                }
            });
            case POOL_EXHAUST -> {
                Slot slot = randomSlot();
                fault(fault, slot.pattern(), () -> exhaust(slot));
            }
            case SLOW_DB -> fault(fault, null, () -> {
                List<TcpProxy> proxies = new ArrayList<>(slots.stream().map(s -> s.proxy).toList());
                proxies.add(jvmProxy);
                proxies.forEach(proxy -> proxy.latency(Duration.ofMillis(150)));
                Chaos.sleep(6000);
                proxies.forEach(proxy -> proxy.latency(Duration.ZERO));
            });
            case PG_CRASH -> fault(server.restartable() ? fault : Fault.TERMINATE, null,
                    server.restartable() ? server::crash : this::terminate);
            case PG_RESTART -> fault(server.restartable() ? fault : Fault.TERMINATE, null,
                    server.restartable() ? server::restart : this::terminate);
            case REDIS_RESTART -> {
                if (redis != null && redis.isEmbedded()) {
                    fault(fault, null, () -> {
                        // A gate holder that lives through the restart, and rows of its key inserted
                        // while Redis is down: Redis comes back empty, and the gate must stand in for
                        // the holder the database shows before it admits the waiting rows (without the
                        // stand-in, a full gate's worth would run beside it: gate_over).
                        boolean held = holdGate();
                        redis.stop();
                        insert(producer, ChaosWorkload.gateWaiters(RESTART_GATE_KEY));
                        Chaos.sleep(3000);
                        redis.start();
                        tally(held ? "redis restarts with a gate holder running" : "redis restarts without a gate holder", 1);
                    });
                }
            }
        }
    }

    /**
     * Inserts a long job into gate key {@link #RESTART_GATE_KEY} and waits (a while) until it runs;
     * says whether it does.
     */
    private boolean holdGate() {
        insert(producer, List.of(ChaosWorkload.gateHolder(RESTART_GATE_KEY)));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline) {
            long running = countSafely("SELECT count(*) FROM S.durable_instances WHERE gate_name = $1"
                    + " AND concurrency_key = $2 AND status = 'executing'", ChaosWorkload.GATE, RESTART_GATE_KEY);
            if (running > 0 && running != Long.MAX_VALUE) {
                return true;
            }
            Chaos.sleep(50);
        }
        return false;
    }

    /** Runs a fault and records its window (label: a LIKE pattern of the labels it struck; null: every engine), by this JVM's clock. */
    private void fault(Fault kind, @Nullable String label, Runnable body) {
        OffsetDateTime from = OffsetDateTime.now(ZoneOffset.UTC);
        long started = System.nanoTime();
        try {
            body.run();
        } finally {
            OffsetDateTime to = OffsetDateTime.now(ZoneOffset.UTC);
            synchronized (faults) {
                faults.merge(kind.name(), 1L, Long::sum);
            }
            String record = ChaosSchema.render(label == null
                    ? "INSERT INTO S.chaos_faults (kind, started_at, ended_at) VALUES ($1, $2, $3)"
                    : "INSERT INTO S.chaos_faults (kind, started_at, ended_at, label) VALUES ($1, $2, $3, $4)", schema);
            Object[] values = label == null ? new Object[] {kind.name(), from, to}
                    : new Object[] {kind.name(), from, to, label};
            Chaos.retry("record fault", () -> Chaos.execute(harness, record, values));
            log.accept("chaos: " + kind + (label == null ? "" : " on " + label) + " in "
                    + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + " ms");
        }
    }

    /** Arms the stall handshake and waits (a while) for a solo handler about to return; says whether one came. */
    private boolean armStall() {
        Chaos.execute(harness, ChaosSchema.render("UPDATE S.chaos_stall SET armed = true, waiting = NULL,"
                + " frozen = false WHERE id = 1", schema));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (countSafely("SELECT count(*) FROM S.chaos_stall WHERE id = 1 AND waiting IS NOT NULL") == 1) {
                return true;
            }
            Chaos.sleep(10);
        }
        return false;
    }

    private Slot randomSlot() {
        return slots.get(ThreadLocalRandom.current().nextInt(slots.size()));
    }

    /** A burst of pg_terminate_backend on the engines' backends, busy ones first. */
    private void terminate() {
        long terminated = 0;
        for (int i = 0; i < 5; i++) {
            terminated += Chaos.count(harness, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM ("
                    + "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    + " AND application_name = $1 AND pid <> pg_backend_pid()"
                    + " ORDER BY (state = 'active') DESC, random() LIMIT $2) p) t",
                    Chaos.ENGINE_APP, 1 + ThreadLocalRandom.current().nextInt(2));
            Chaos.sleep(20 + ThreadLocalRandom.current().nextInt(40));
        }
        tally("backends terminated", terminated);
    }

    /** Takes every connection of the engine's pool (as they come free) and holds them past the lease. */
    private void exhaust(Slot slot) {
        ConnectionPool pool = slot.pool;
        List<Connection> held = new ArrayList<>();
        try {
            for (int i = 0; i < 8; i++) {
                Connection connection = Mono.from(pool.create()).block(Duration.ofSeconds(15));
                held.add(connection);
            }
            tally("pools exhausted", 1);
            Chaos.sleep(HOLD.toMillis());
        } catch (RuntimeException e) {
            tally("pool exhaustion incomplete", 1);
        } finally {
            for (Connection connection : held) {
                Mono.from(connection.close()).onErrorResume(x -> Mono.empty()).block(Duration.ofSeconds(10));
            }
        }
    }

    /** Disposes an engine's pool under it (no drain, nothing released), then starts a new incarnation. */
    private void replaceEngine(Slot slot) {
        DurableEngine old = slot.engine;
        slot.pool.dispose();
        // Stops its loops; its buffered rows cannot be released and its runs cannot commit any more.
        // Kept until its close ends (then the end's close need not wait for it, and a soak's heap
        // does not keep every engine a fault ever replaced).
        zombies.add(old);
        old.closeLater().doFinally(signal -> zombies.remove(old))
                .subscribe(null, error -> tally("zombie close errors", 1));
        slot.generation++;
        startSlot(slot);
    }

    private void startSlot(Slot slot) {
        String label = "e" + slot.index + "g" + slot.generation;
        Chaos.retry("start engine " + label, () -> {
            ConnectionPool pool = Chaos.pool(slot.proxy.proxiedUrl(server.url), Chaos.ENGINE_APP, 10);
            DurableEngine.Builder builder = DurableEngine.builder(Chaos.engineOptions(pool, schema,
                    "chaos-e" + slot.index, redis == null ? null : redis.uri(), slot.pokes, false).build());
            for (Definition definition : new ChaosWorkload(label, harness, schema, false, config.burn(),
                    generation(slot)).definitions()) {
                builder.register(definition);
            }
            builder.schedule(ChaosWorkload.tick());
            DurableEngine engine = builder.build();
            try {
                engine.start().block(Duration.ofSeconds(30));
            } catch (RuntimeException e) {
                engine.closeLater().onErrorResume(x -> Mono.empty()).block(Duration.ofSeconds(10));
                pool.dispose();
                throw e;
            }
            slot.engine = engine;
            slot.pool = pool;
        });
        slot.label = label;
        Chaos.retry("register " + label, () -> Chaos.registerWorkers(harness, schema, label, slot.engine));
    }

    /**
     * The release of the workload the engine incarnation {@code n} runs: 1 without {@code --skew};
     * with it, the two alternate (so an engine a fault replaces comes back as the other release).
     */
    private int generation(int n) {
        return config.skew() ? 1 + (n + 1) % 2 : 1;
    }

    /**
     * The release a slot's current incarnation runs: the first slot always the second release (it
     * can run every row: version 1 rows migrate as it claims them, so some engine always can), the
     * others alternating with each replacement.
     */
    private int generation(Slot slot) {
        return slot.index == 0 && config.skew() ? 2 : generation(slot.index + slot.generation);
    }

    // ---- the worker JVM -----------------------------------------------------------------------

    private void startJvm() {
        synchronized (jvmLock) {
            int generation = generation(jvmCount);
            // The first release's JVMs run the earlier build when there is one: its engine and its
            // workload, the older workflow version an older deploy carries.
            Path previousJar = generation == 1 ? config.previousJar() : null;
            boolean previous = previousJar != null;
            String label = "jvm" + (jvmCount++) + (previous ? PREVIOUS_JAR_SUFFIX : "");
            List<String> command = List.of(Jvms.javaBinary(), "-Xmx256m", "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", previousJar != null ? previousJar.toString() : Jvms.classpath(), ChaosWorker.class.getName(),
                    jvmProxy.proxiedUrl(server.url), server.url, schema, label, redis == null ? "-" : redis.uri(),
                    Long.toString(config.burn().toMillis()), Integer.toString(generation));
            try {
                jvm = new ProcessBuilder(command)
                        .redirectErrorStream(true)
                        .redirectOutput(work.resolve(label + ".log").toFile())
                        .start();
            } catch (IOException e) {
                throw new UncheckedIOException("worker JVM did not start", e);
            }
            jvmLabel = label;
            tally("worker JVMs started", 1);
            if (previous) {
                tally("worker JVMs started on the previous jar", 1);
            }
        }
    }

    /** A worker JVM that died on its own (a poison job halted it) is replaced. */
    private void watchJvm() {
        synchronized (jvmLock) {
            if (jvm != null && !jvm.isAlive()) {
                tally("worker JVM exits " + jvm.exitValue(), 1);
                jvm = null;
                startJvm();
            }
        }
    }

    /** Waits (a while) until the worker JVM is registered and in the middle of a step; says whether it is. */
    private boolean awaitJvmMidStep() {
        return awaitJvmMidStep("%");
    }

    /** As {@link #awaitJvmMidStep()}, in a step of the types {@code type} matches (LIKE). */
    private boolean awaitJvmMidStep(String type) {
        String label = jvmLabel;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (System.nanoTime() < deadline) {
            long registered = countSafely("SELECT count(*) FROM S.chaos_workers WHERE label = $1", label);
            long running = countSafely("SELECT count(*) FROM S.chaos_exec WHERE label = $1 AND ended_at IS NULL"
                    + " AND type LIKE $2", label, type);
            if (registered > 0 && registered != Long.MAX_VALUE && running > 0 && running != Long.MAX_VALUE) {
                return true;
            }
            Chaos.sleep(50);
        }
        return false;
    }

    private void killAndRestartJvm() {
        boolean midStep = awaitJvmMidStep();
        synchronized (jvmLock) {
            Process process = jvm;
            if (process != null) {
                process.destroyForcibly();
                try {
                    process.waitFor(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            tally(midStep ? "worker JVMs killed mid-step" : "worker JVMs killed idle", 1);
            jvm = null;
            startJvm();
        }
    }

    private void stopAndContinueJvm() {
        boolean midStep = awaitJvmMidStep();
        synchronized (jvmLock) {
            if (jvm == null || !jvm.isAlive()) {
                return;
            }
            long pid = jvm.pid();
            signal("STOP", pid);
            tally(midStep ? "worker JVMs stopped mid-step" : "worker JVMs stopped idle", 1);
            Chaos.sleep(HOLD.toMillis());
            signal("CONT", pid);
        }
    }

    private static void signal(String signal, long pid) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
            if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
                throw new IllegalStateException("kill -" + signal + " " + pid + " failed");
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    // ---- the end ------------------------------------------------------------------------------

    private void closeEngines() {
        List<Mono<Void>> closing = new ArrayList<>();
        for (Slot slot : slots) {
            if (slot.engine != null) {
                closing.add(slot.engine.closeLater().onErrorResume(e -> Mono.empty()));
            }
        }
        for (DurableEngine zombie : zombies) {
            closing.add(zombie.closeLater().onErrorResume(e -> Mono.empty()));
        }
        try {
            Mono.when(closing).block(Duration.ofSeconds(60));
        } catch (RuntimeException ignored) {
            // Best effort: the checks read the database.
        }
        synchronized (jvmLock) {
            if (jvm != null) {
                jvm.destroyForcibly();
                try {
                    jvm.waitFor(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                jvm = null;
            }
        }
    }

    @Override
    public void close() {
        loading = false;
        closeEngines();
        try {
            Mono.when(producer.closeLater().onErrorResume(e -> Mono.empty()),
                    signaller.closeLater().onErrorResume(e -> Mono.empty())).block(Duration.ofSeconds(60));
        } catch (RuntimeException ignored) {
            // The server goes away next.
        }
        for (Slot slot : slots) {
            if (slot.pool != null) {
                slot.pool.dispose();
            }
            closeQuietly(slot.proxy);
        }
        closeQuietly(jvmProxy);
        producerPool.dispose();
        signallerPool.dispose();
        harness.dispose();
        if (redis != null && redis.isEmbedded()) {
            redis.start();
        }
        server.close();
    }

    private void closeQuietly(TcpProxy proxy) {
        try {
            proxy.close();
        } catch (RuntimeException e) {
            log.accept("chaos: " + e.getMessage());
        }
    }

    static void deleteRecursively(Path directory) {
        if (!Files.exists(directory)) {
            return;
        }
        try (Stream<Path> files = Files.walk(directory)) {
            for (Path path : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("the chaos work directory " + directory + " could not be removed", e);
        }
    }

}
