package dev.durable.benchmarks.chaos;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Maintenance;
import dev.durable.QueueOptions;
import dev.durable.QueueStats;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.poke.PokeTransports;
import dev.durable.redis.RedisLimiters;
import dev.durable.redis.RedisPokeTransports;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Option;
import io.r2dbc.spi.Result;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;

/**
 * The chaos harness (issues 10 and 18): a workload of what users run (jobs with keys, gates and
 * rate limits, workflows with inline chains, children, retries and awaits with timeouts, a recurring
 * job, deep buffers, poison jobs) on several in-process engines and a worker JVM sharing one
 * PostgreSQL, each engine behind a TCP proxy the harness controls; faults of every {@link Fault}
 * kind injected while it runs; then the invariants of {@link ChaosSchema} checked from the database.
 * It prints one line, all zeros on a correct engine:
 *
 * <pre>CHAOS jobs=N ... duplicates=D dup_rate=R faults=F stale_commit=0 terminal_changed=0 ...</pre>
 *
 * <pre>
 * benchmarks/chaos [--minutes M] [--engines N] [--fault-every D] [--redis] [--rounds R] [--faults KIND,...]
 *                  [--recovery-minutes M] [--burn-ms MS] [--load-factor F] [--skew] [--previous-jar JAR]
 * </pre>
 * With {@code --minutes}, load for that long, a fault every D seconds, cycling through the kinds;
 * with {@code --rounds} (and no minutes), load until R rounds of every kind have struck (the suite's
 * short run, {@code ChaosIT}). Overload: {@code --burn-ms} makes every plain job spend that much CPU,
 * {@code --load-factor} inserts that many times the plain jobs (with {@code --engines 8} on two
 * cores, more than the machine serves); the recovery that follows must still settle everything.
 * The recovery runs until no row is left, or until none has settled for {@code --recovery-minutes}
 * (default 3; an hour at most): a deadline of progress, not of time, so a backlog that drains at the
 * rate its keys and limits allow is waited for, and rows that stopped moving are what it reports. Version skew: {@code --skew} runs two releases of the workload side by side
 * (the second has version 2 of the workflow, with a new step and a migration from version 1): the
 * first in-process engine always runs the second (it can run every row), the others start
 * alternating and every other worker JVM runs each, and an engine a fault replaces comes back as the
 * other release, as a rolling deploy and its rollback do. With {@code --previous-jar} (implies
 * {@code --skew}) the worker JVMs of the first release run that jar, an earlier build of this
 * harness and of the engine ({@code benchmarks/chaos-previous} builds one from a commit): two engine
 * releases on one database under the same faults, as a rolling deploy of Durable itself. Once a minute the harness samples its heap after a collection, its threads,
 * the server's connections and the backlog: a SOAK line sums them up (the trend past warm-up). Exit status 1 when an invariant broke. The run's files (the server's
 * data and logs, the worker JVMs' logs) live in one temporary directory, removed after a clean run
 * and kept, and named, after a failed one.
 */
public final class Chaos {

    static final String ENGINE_APP = "durable-chaos";
    static final String HARNESS_APP = "chaos-harness";
    static final Duration LEASE = Duration.ofSeconds(3);
    static final Duration CALL_TIMEOUT = Duration.ofSeconds(4);

    private Chaos() {
    }

    /**
     * How long to load (a soak) or how many rounds of faults to inject (a count-based run, which
     * loads until every fault has struck, within a generous cap), how long the recovery may go
     * without a row settling, how often a fault strikes, how many in-process engines, whether Redis
     * runs (limiter, pokes, its restarts), which kinds of fault, the overload knobs (the CPU each plain job burns and how
     * many times the usual plain jobs are inserted), whether two releases run side by side, and the
     * earlier build the first release's worker JVMs run (null: this one).
     */
    public record Config(Duration load, int rounds, Duration recovery, Duration faultEvery, int engines,
            boolean redis, List<Fault> kinds, Duration burn, int loadFactor, boolean skew,
            @Nullable Path previousJar) {

        /**
         * The short run of the test suite: one round of every kind, however long a loaded machine
         * takes (at most 15 minutes), with two releases side by side and plain jobs that burn a
         * little CPU (the overload knob, not an overload: that is {@code benchmarks/chaos}'s).
         */
        public static Config shortRun() {
            return new Config(Duration.ofMinutes(15), 1, Duration.ofMinutes(3), Duration.ofSeconds(2), 3, false,
                    Fault.round(false), Duration.ofMillis(2), 1, true, null);
        }

        /** How many faults a count-based run injects. */
        int faults() {
            return rounds == Integer.MAX_VALUE ? Integer.MAX_VALUE : rounds * kinds.size();
        }
    }

    public static void main(String[] args) {
        double minutes = -1;
        int engines = 3;
        Duration faultEvery = Duration.ofSeconds(5);
        boolean redis = false;
        int rounds = -1;
        List<Fault> only = null;
        Duration recovery = null;
        Duration burn = Duration.ZERO;
        int loadFactor = 1;
        boolean skew = false;
        Path previousJar = null;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (arg) {
                case "--minutes" -> minutes = Double.parseDouble(require(arg, value, i++));
                case "--engines" -> engines = Integer.parseInt(require(arg, value, i++));
                case "--fault-every" -> faultEvery = Duration.ofMillis((long) (Double.parseDouble(require(arg, value, i++)) * 1000));
                case "--rounds" -> rounds = Integer.parseInt(require(arg, value, i++));
                case "--redis" -> redis = true;
                case "--skew" -> skew = true;
                case "--previous-jar" -> previousJar = Path.of(require(arg, value, i++));
                case "--recovery-minutes" -> recovery = Duration.ofMillis((long) (Double.parseDouble(require(arg, value, i++)) * 60_000));
                case "--burn-ms" -> burn = Duration.ofMillis(Long.parseLong(require(arg, value, i++)));
                case "--load-factor" -> loadFactor = Integer.parseInt(require(arg, value, i++));
                case "--faults" -> {
                    only = new ArrayList<>();
                    for (String kind : require(arg, value, i++).split(",")) {
                        only.add(Fault.valueOf(kind.strip().toUpperCase(java.util.Locale.ROOT)));
                    }
                }
                default -> throw new IllegalArgumentException("unknown argument " + arg + "; usage: benchmarks/chaos"
                        + " [--minutes M] [--engines N] [--fault-every SECONDS] [--redis] [--rounds R] [--faults KIND,...]"
                        + " [--recovery-minutes M] [--burn-ms MS] [--load-factor F] [--skew] [--previous-jar JAR]");
            }
        }
        if (engines < 1 || loadFactor < 1 || burn.isNegative()) {
            throw new IllegalArgumentException("--engines and --load-factor must be at least 1, --burn-ms at least 0");
        }
        if (previousJar != null && !Files.isRegularFile(previousJar)) {
            throw new IllegalArgumentException("--previous-jar " + previousJar + " is not a file");
        }
        List<Fault> kinds = new ArrayList<>();
        for (Fault fault : Fault.round(redis)) {
            if (only == null || only.contains(fault)) {
                kinds.add(fault);
            }
        }
        // A soak loads for its minutes (with --rounds, until those rounds too); a count-based run
        // until its rounds (default 1) have struck, within 30 minutes.
        Config config = new Config(minutes > 0 ? Duration.ofMillis((long) (minutes * 60_000)) : Duration.ofMinutes(30),
                rounds > 0 ? rounds : minutes > 0 ? Integer.MAX_VALUE : 1,
                recovery != null ? recovery : Duration.ofMinutes(3), faultEvery, engines, redis, kinds, burn,
                loadFactor, skew || previousJar != null, previousJar);
        Report report = run(config, line -> System.err.println(line));
        System.out.println(report.details());
        if (!report.minutes().isEmpty()) {
            System.out.println(report.soakLine());
        }
        System.out.println(report.line());
        System.exit(report.ok() ? 0 : 1);
    }

    private static String require(String option, @Nullable String value, int at) {
        if (value == null) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return value;
    }

    /** One chaos run; blocking (a harness, never on a reactive thread). */
    public static Report run(Config config, Consumer<String> log) {
        return ChaosRun.execute(config, log);
    }

    // ---- shared with the worker JVM -------------------------------------------------------------

    static ConnectionPool pool(String url, String applicationName, int maxSize) {
        ConnectionFactoryOptions options = ConnectionFactoryOptions.parse(url).mutate()
                .option(Option.valueOf("applicationName"), applicationName)
                .option(ConnectionFactoryOptions.CONNECT_TIMEOUT, Duration.ofSeconds(5))
                .build();
        return new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(options))
                .name(applicationName + "-" + System.nanoTime())
                .initialSize(0)
                .maxSize(maxSize)
                .maxAcquireTime(Duration.ofSeconds(10))
                .maxCreateConnectionTime(Duration.ofSeconds(5))
                .build());
    }

    /** How an engine hears of new work besides its poll. */
    enum Pokes { LOCAL, NOTIFY, REDIS }

    /**
     * The options of every chaos engine: 3 s leases beaten every 500 ms, calls bounded by 4 s, the
     * gate, the rate limit and the sliding window (in PostgreSQL, or in Redis when {@code redisUri} is set: every engine
     * that runs limited rows uses the same limiter), the shared queues, and the solo queue in the
     * worker JVM only.
     */
    static EngineOptions.Builder engineOptions(ConnectionFactory factory, String schema, String name,
            @Nullable String redisUri, Pokes pokes, boolean solo) {
        List<QueueOptions.Builder> queues = new ArrayList<>(List.of(
                QueueOptions.builder(ChaosWorkload.JOBS).concurrency(8).prefetch(4),
                QueueOptions.builder(ChaosWorkload.FLOWS).concurrency(4).prefetch(2),
                // One run slot and a deep buffer: rows wait there longer than the lease.
                QueueOptions.builder(ChaosWorkload.DEEP_QUEUE).concurrency(1).prefetch(6)));
        if (solo) {
            queues.add(QueueOptions.builder(ChaosWorkload.SOLO_QUEUE).concurrency(3).prefetch(1));
        }
        EngineOptions.Builder options = EngineOptions.builder().connectionFactory(factory).schema(schema).name(name)
                .leaseTtl(LEASE)
                .heartbeatInterval(Duration.ofMillis(500))
                .reaperInterval(Duration.ofMillis(500))
                .awaitExpiry(Maintenance.TaskOptions.every(Duration.ofMillis(500)))
                // The key_heads invariant checks the triggers' elections: the walk that repairs a missed one
                // must not hide it (the retry of elections that gave up on a held lock stays on: part of them).
                .keyHealer(Maintenance.TaskOptions.every(EngineOptions.DEFAULT_KEY_HEAL_INTERVAL).disabled())
                .callTimeout(CALL_TIMEOUT)
                // Two transactional runs at once, each holding a connection: the pools have two more for them.
                .transactionalConcurrency(2)
                .applyMigrations(false)
                .gate(ChaosWorkload.GATE, ChaosWorkload.GATE_CAPACITY)
                .rateLimit(ChaosWorkload.RATE, ChaosWorkload.RATE_PER_SECOND, ChaosWorkload.RATE_BURST)
                .window(ChaosWorkload.WINDOW, ChaosWorkload.WINDOW_LIMIT, ChaosWorkload.WINDOW_LENGTH)
                .pokeTransport(pokes(pokes, redisUri));
        for (QueueOptions.Builder queue : queues) {
            options.queue(queue.pollInterval(Duration.ofMillis(100)).maxPollInterval(Duration.ofSeconds(1))
                    .drainTimeout(Duration.ofSeconds(2)).build());
        }
        if (redisUri != null) {
            options.limiter(RedisLimiters.redis(redisUri));
        }
        return options;
    }

    static PokeTransportFactory pokes(Pokes pokes, @Nullable String redisUri) {
        return switch (pokes) {
            case LOCAL -> PokeTransports.local();
            case NOTIFY -> PokeTransports.postgresNotify();
            case REDIS -> redisUri == null ? PokeTransports.local() : RedisPokeTransports.redis(redisUri);
        };
    }

    static void registerWorkers(ConnectionFactory factory, String schema, String label, DurableEngine engine) {
        for (QueueStats scheduler : engine.queueStats()) {
            execute(factory, "INSERT INTO " + ChaosSchema.q(schema) + ".chaos_workers (label, worker) VALUES ($1, $2)"
                    + " ON CONFLICT DO NOTHING", label, scheduler.worker());
        }
    }

    /** Retries a blocking set-up step through faults (a restart in progress, a cut connection). */
    static void retry(String what, Runnable step) {
        RuntimeException last = null;
        for (int attempt = 0; attempt < 40; attempt++) {
            try {
                step.run();
                return;
            } catch (RuntimeException e) {
                last = e;
                sleep(500);
            }
        }
        throw new IllegalStateException(what + " kept failing", last);
    }

    static long execute(ConnectionFactory factory, String sql, Object... args) {
        Long updated = Flux.usingWhen(factory.create(), (Connection c) -> {
                    var statement = c.createStatement(sql);
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated);
                }, Connection::close)
                .reduce(0L, Long::sum)
                .block(Duration.ofSeconds(60));
        return updated == null ? 0 : updated;
    }

    static long count(ConnectionFactory factory, String sql, Object... args) {
        return Flux.usingWhen(factory.create(), (Connection c) -> {
                    var statement = c.createStatement(sql);
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute())
                            .flatMap(result -> result.map((row, meta) -> ((Number) row.get(0)).longValue()));
                }, Connection::close)
                .next()
                .blockOptional(Duration.ofSeconds(120))
                .orElse(0L);
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
