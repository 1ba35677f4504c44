package dev.durable.chaos;

import dev.durable.Definition;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobRequest;
import dev.durable.QueueStats;
import dev.durable.NoTargetException;
import dev.durable.QueueOptions;
import dev.durable.testing.TestPostgres;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Option;
import io.r2dbc.spi.Result;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The chaos harness (issue 10): a mixed workload (jobs, workflows with signals, fan-out and join,
 * concurrency keys) on several engines sharing one PostgreSQL, faults injected while it runs, and
 * the invariants checked from the database at the end (see {@link ChaosSchema} for their precise
 * definitions). Prints one line:
 *
 * <pre>CHAOS jobs=N terminal=N lost=0 stuck=0 overlap=0 double_commit=0 executions=M faults=F</pre>
 *
 * Faults, in turn: {@code pg_terminate_backend} of random Durable backends (busy ones first, so
 * picks, commits and heartbeats are cut mid-statement); an in-process engine disposed abruptly (its
 * connection pool disposed under it, no drain) and a new incarnation of the same name started in its
 * place; a separate worker JVM ({@link ChaosWorker}) killed with SIGKILL while a step runs, whose
 * leases the others' reapers recover; PostgreSQL restarted ({@code pg_ctl restart -m fast} on the
 * harness's own embedded server; skipped, and said so, when {@code DURABLE_PG_URL} names a server).
 *
 * <p>The soak (10 minutes of load, then recovery and the checks):
 * <pre>
 * mvn -q -pl reactive-core -am test-compile exec:java -Dexec.mainClass=dev.durable.chaos.Chaos -Dexec.args="--minutes 10"
 * </pre>
 * A short run is {@code ChaosIT}, part of the normal suite.
 */
public final class Chaos {

    static final String ENGINE_APP = "durable-chaos";
    static final String HARNESS_APP = "chaos-harness";

    /**
     * How long to load (a soak) or how many faults to inject (a count-based run, which loads until
     * every fault has struck, within a generous cap), how long recovery may take, how often a fault
     * strikes, in-process engines.
     */
    public record Config(Duration load, int faults, Duration recovery, Duration faultEvery, int engines) {

        /**
         * The short run of the test suite: two rounds of every fault kind, however long a loaded
         * machine takes to inject them (at most ten minutes), then recovery.
         */
        public static Config shortRun() {
            return new Config(Duration.ofMinutes(10), 2 * CYCLE.size(), Duration.ofMinutes(2), Duration.ofSeconds(3), 3);
        }

        public static Config soak(double minutes) {
            return new Config(Duration.ofMillis((long) (minutes * 60_000)), Integer.MAX_VALUE, Duration.ofSeconds(90),
                    Duration.ofSeconds(5), 3);
        }
    }

    /** What the run found. */
    public record Report(long jobs, long terminal, long lost, long stuck, long overlap, long doubleCommit,
            long executions, long faults, long unknownCommits, String details) {

        public String line() {
            return "CHAOS jobs=" + jobs + " terminal=" + terminal + " lost=" + lost + " stuck=" + stuck
                    + " overlap=" + overlap + " double_commit=" + doubleCommit + " executions=" + executions
                    + " faults=" + faults;
        }

        public boolean ok() {
            return lost == 0 && stuck == 0 && overlap == 0 && doubleCommit == 0 && unknownCommits == 0;
        }
    }

    private enum Fault { TERMINATE, ENGINE, JVM, RESTART }

    private static final List<Fault> CYCLE = List.of(Fault.TERMINATE, Fault.ENGINE, Fault.TERMINATE, Fault.JVM,
            Fault.TERMINATE, Fault.RESTART);

    public static void main(String[] args) {
        double minutes = 1;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--minutes") && i + 1 < args.length) {
                minutes = Double.parseDouble(args[++i]);
            }
        }
        Report report = run(Config.soak(minutes), System.out::println);
        System.out.println(report.details());
        System.out.println(report.line());
        if (!report.ok()) {
            throw new IllegalStateException("chaos invariants broken: " + report.line());
        }
    }

    /** One chaos run; blocking (a harness, never on a reactive thread). */
    public static Report run(Config config, java.util.function.Consumer<String> log) {
        try (Server server = Server.start(); Run run = new Run(config, server, log)) {
            return run.execute();
        }
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

    static EngineOptions.Builder engineOptions(ConnectionFactory factory, String schema, String name) {
        QueueOptions.Builder jobs = QueueOptions.builder(ChaosWorkload.JOBS).concurrency(8).prefetch(4);
        QueueOptions.Builder flows = QueueOptions.builder(ChaosWorkload.FLOWS).concurrency(4).prefetch(2);
        for (QueueOptions.Builder queue : List.of(jobs, flows)) {
            queue.pollInterval(Duration.ofMillis(100)).maxPollInterval(Duration.ofSeconds(1))
                    .drainTimeout(Duration.ofSeconds(2));
        }
        return EngineOptions.builder().connectionFactory(factory).schema(schema).name(name)
                .leaseTtl(Duration.ofSeconds(3))
                .heartbeatInterval(Duration.ofMillis(500))
                .reaperInterval(Duration.ofMillis(500))
                .awaitExpiry(dev.durable.Maintenance.TaskOptions.every(Duration.ofMillis(500)))
                .applyMigrations(false)
                .queue(jobs.build())
                .queue(flows.build());
    }

    static void registerWorkers(ConnectionFactory factory, String schema, String label, DurableEngine engine) {
        for (QueueStats scheduler : engine.queueStats()) {
            execute(factory, "INSERT INTO \"" + schema + "\".chaos_workers (label, worker) VALUES ($1, $2)"
                    + " ON CONFLICT DO NOTHING", label, scheduler.worker());
        }
    }

    /** Retries a blocking set-up step through faults (a restart in progress, a cut connection). */
    static void retry(String what, Runnable step) {
        RuntimeException last = null;
        for (int attempt = 0; attempt < 30; attempt++) {
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
                .block(Duration.ofSeconds(30));
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
                .blockOptional(Duration.ofSeconds(60))
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

    // ---- the server -----------------------------------------------------------------------------

    /** The harness's own embedded PostgreSQL (restartable), or the one DURABLE_PG_URL names. */
    static final class Server implements AutoCloseable {

        final String url;
        private final @Nullable EmbeddedPostgres embedded;
        private final @Nullable Path dataDirectory;

        private Server(String url, @Nullable EmbeddedPostgres embedded, @Nullable Path dataDirectory) {
            this.url = url;
            this.embedded = embedded;
            this.dataDirectory = dataDirectory;
        }

        static Server start() {
            String fromEnv = System.getenv(TestPostgres.URL_ENV);
            if (fromEnv != null && !fromEnv.isBlank()) {
                return new Server(TestPostgres.url(), null, null);
            }
            try {
                Path directory = Files.createTempDirectory("durable-chaos-pg");
                EmbeddedPostgres embedded = EmbeddedPostgres.builder()
                        .setDataDirectory(directory)
                        .setCleanDataDirectory(true)
                        .setServerConfig("max_connections", "300")
                        .setServerConfig("shared_buffers", "128MB")
                        .setServerConfig("fsync", "off")
                        .setServerConfig("synchronous_commit", "off")
                        .setPGStartupWait(Duration.ofSeconds(60))
                        .start();
                return new Server("r2dbc:postgresql://postgres:postgres@localhost:" + embedded.getPort() + "/postgres",
                        embedded, directory);
            } catch (IOException e) {
                throw new UncheckedIOException("the chaos PostgreSQL did not start", e);
            }
        }

        boolean restartable() {
            return embedded != null;
        }

        /**
         * {@code pg_ctl restart -m fast} with the binaries the server runs from (the first word of
         * postmaster.opts) and its options: every connection is cut, a checkpoint is written, the
         * port stays. As root, under {@code unshare -U} as zonky itself runs them (PostgreSQL refuses
         * to run as root).
         */
        void restart() {
            try {
                String opts = Files.readString(dataDirectory.resolve("postmaster.opts"), StandardCharsets.UTF_8).strip();
                Path pgCtl = Path.of(parseOptions(opts).get(0)).resolveSibling("pg_ctl");
                Path log = dataDirectory.resolveSibling(dataDirectory.getFileName() + "-server.log");
                Path out = dataDirectory.resolveSibling(dataDirectory.getFileName() + "-pg_ctl.log");
                List<String> command = new ArrayList<>();
                if ("root".equals(System.getProperty("user.name"))) {
                    command.addAll(List.of("unshare", "-U"));
                }
                command.addAll(List.of(pgCtl.toString(), "restart", "-D", dataDirectory.toString(), "-m", "fast",
                        "-w", "-t", "60", "-l", log.toString()));
                Process process = new ProcessBuilder(command)
                        .redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.appendTo(out.toFile()))
                        .start();
                if (!process.waitFor(90, TimeUnit.SECONDS) || process.exitValue() != 0) {
                    throw new IllegalStateException("pg_ctl restart failed: " + Files.readString(out).strip());
                }
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!accepting()) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("PostgreSQL did not come back; see " + log);
                    }
                    sleep(100);
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }

        private boolean accepting() {
            try {
                Mono.usingWhen(ConnectionFactories.get(url).create(),
                                c -> Mono.from(c.createStatement("SELECT 1").execute())
                                        .flatMap(r -> Mono.from(r.getRowsUpdated())),
                                Connection::close)
                        .block(Duration.ofSeconds(5));
                return true;
            } catch (RuntimeException e) {
                return false;
            }
        }

        /** postmaster.opts: the binary, then each option double-quoted. */
        private static List<String> parseOptions(String opts) {
            List<String> words = new ArrayList<>();
            java.util.regex.Matcher matcher = java.util.regex.Pattern.compile("\"([^\"]*)\"|(\\S+)").matcher(opts);
            while (matcher.find()) {
                words.add(matcher.group(1) != null ? matcher.group(1) : matcher.group(2));
            }
            return words;
        }

        @Override
        public void close() {
            if (embedded != null) {
                try {
                    embedded.close();
                } catch (IOException ignored) {
                    // The data directory is temporary.
                }
            }
        }
    }

    // ---- one run --------------------------------------------------------------------------------

    /** An in-process engine slot: replaced by a new incarnation when the ENGINE fault strikes it. */
    private static final class Slot {
        final int index;
        int generation;
        @Nullable DurableEngine engine;
        @Nullable ConnectionPool pool;

        Slot(int index) {
            this.index = index;
        }
    }

    private static final class Run implements AutoCloseable {

        private final Config config;
        private final Server server;
        private final java.util.function.Consumer<String> log;
        private final String schema = "chaos_" + ProcessHandle.current().pid() + "_" + (System.nanoTime() % 100_000);
        private final ConnectionPool harness;
        private final ConnectionPool producerPool;
        private final DurableEngine producer;
        private final List<Slot> slots = new ArrayList<>();
        private final List<DurableEngine> zombies = new CopyOnWriteArrayList<>();
        private final List<Long> recentIds = new CopyOnWriteArrayList<>();
        private final List<Long> recentFlows = new CopyOnWriteArrayList<>();
        private @Nullable Process jvm;
        private int jvmCount;
        private volatile boolean loading = true;
        private final Map<String, AtomicLong> counters = new java.util.concurrent.ConcurrentSkipListMap<>();
        private final List<String> notes = new CopyOnWriteArrayList<>();
        private final Path logDirectory;

        Run(Config config, Server server, java.util.function.Consumer<String> log) {
            this.config = config;
            this.server = server;
            this.log = log;
            this.harness = pool(server.url, HARNESS_APP, 12);
            this.producerPool = pool(server.url, ENGINE_APP, 6);
            this.producer = DurableEngine.builder(EngineOptions.builder().connectionFactory(producerPool)
                            .schema(schema).name("chaos-producer").runMaintenance(false).build())
                    .register(new ChaosWorkload("producer", harness, schema).definitions().get(0))
                    .register(new ChaosWorkload("producer", harness, schema).definitions().get(1))
                    .build();
            try {
                this.logDirectory = Files.createTempDirectory("durable-chaos-logs");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        private void tally(String counter, long n) {
            counters.computeIfAbsent(counter, c -> new AtomicLong()).addAndGet(n);
        }

        private long counter(String counter) {
            AtomicLong value = counters.get(counter);
            return value == null ? 0 : value.get();
        }

        Report execute() {
            log.accept("chaos: schema " + schema + " on " + (server.restartable() ? "a dedicated embedded PostgreSQL"
                    : TestPostgres.URL_ENV) + "; load " + config.load() + ", a fault every " + config.faultEvery());
            producer.start().block(Duration.ofSeconds(60)); // applies the migrations
            Chaos.execute(harness, ChaosSchema.ddl(schema));
            for (int i = 0; i < config.engines(); i++) {
                Slot slot = new Slot(i);
                slots.add(slot);
                startSlot(slot);
            }
            startJvm();
            if (!server.restartable()) {
                notes.add("restart fault skipped: " + TestPostgres.URL_ENV + " is set (not our server to restart)");
                log.accept("chaos: " + notes.get(notes.size() - 1));
            }

            long loadEnd = System.nanoTime() + config.load().toNanos();
            int injected = 0;
            List<Thread> threads = List.of(
                    loop("chaos-insert", 100, this::insertSome),
                    loop("chaos-signal", 50, this::signalOrCancel),
                    loop("chaos-sample", 250, this::sample));
            threads.forEach(Thread::start);
            int next = 0;
            long progressAt = System.nanoTime();
            while (System.nanoTime() < loadEnd && injected < config.faults()) {
                sleep(config.faultEvery().toMillis());
                if (System.nanoTime() >= loadEnd) {
                    break;
                }
                injected++;
                Fault fault = CYCLE.get(next++ % CYCLE.size());
                try {
                    inject(fault);
                } catch (RuntimeException e) {
                    tally("fault errors", 1);
                    log.accept("chaos: fault " + fault + " failed: " + e);
                }
                if (System.nanoTime() - progressAt > TimeUnit.SECONDS.toNanos(30)) {
                    progressAt = System.nanoTime();
                    log.accept("chaos: " + counters);
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
            // The last worker JVM dies like the others: its leases are part of the recovery.
            killJvm();

            log.accept("chaos: load over, recovering (up to " + config.recovery() + ")");
            String nonTerminal = "SELECT count(*) FROM \"" + schema + "\".durable_instances"
                    + " WHERE status NOT IN ('done', 'failed', 'cancelled')";
            long recoveryEnd = System.nanoTime() + config.recovery().toNanos();
            long left = Long.MAX_VALUE;
            while (System.nanoTime() < recoveryEnd) {
                left = countSafely(nonTerminal);
                if (left == 0) {
                    break;
                }
                sleep(500);
            }
            return check();
        }

        private Report check() {
            long jobs = count(harness, "SELECT count(*) FROM \"" + schema + "\".durable_instances");
            long terminal = count(harness, "SELECT count(*) FROM \"" + schema + "\".durable_instances"
                    + " WHERE status IN ('done', 'failed', 'cancelled')");
            long stuck = count(harness, "SELECT count(*) FROM \"" + schema + "\".durable_instances"
                    + " WHERE status = 'executing' AND lease_expires_at < now()");
            long foreign = count(harness, ChaosSchema.foreignClaimCommits(schema));
            long intersecting = count(harness, ChaosSchema.intersectingCommits(schema));
            long keySamples = counter("key overlap samples");
            long tokensTwice = count(harness, ChaosSchema.tokensCommittedTwice(schema));
            long claimsTwice = count(harness, ChaosSchema.claimsCommittedTwice(schema));
            long broken = count(harness, ChaosSchema.brokenStateSequences(schema));
            long unknown = count(harness, ChaosSchema.unknownTokens(schema));
            long executions = count(harness, "SELECT count(*) FROM \"" + schema + "\".chaos_exec");
            long commits = count(harness, "SELECT count(*) FROM \"" + schema + "\".chaos_audit WHERE token IS NOT NULL");
            long recovered = count(harness, "SELECT count(*) FROM \"" + schema + "\".chaos_audit"
                    + " WHERE token IS NULL AND new_status IN ('runnable', 'failed') AND old_claimed_by IS NOT NULL");
            String statuses = String.join(", ", statusCounts());
            long faults = counter("fault terminate") + counter("fault engine") + counter("fault jvm")
                    + counter("fault restart");
            String details = "chaos details: statuses {" + statuses + "}; committed executions " + commits
                    + "; transitions out of executing without a commit " + recovered
                    + "; overlap = foreign-claim commits " + foreign + " + intersecting commits " + intersecting
                    + " + key samples " + keySamples + "; double_commit = tokens twice " + tokensTwice
                    + " + claims twice " + claimsTwice + " + broken state sequences " + broken
                    + "; unknown commits " + unknown + "; counters " + counters
                    + (notes.isEmpty() ? "" : "; " + String.join("; ", notes));
            return new Report(jobs, terminal, jobs - terminal, stuck, foreign + intersecting + keySamples,
                    tokensTwice + claimsTwice + broken, executions, faults, unknown, details);
        }

        private List<String> statusCounts() {
            return Flux.usingWhen(harness.create(), (Connection c) -> Flux.from(c.createStatement(
                                    "SELECT status, count(*) FROM \"" + schema + "\".durable_instances GROUP BY status"
                                            + " ORDER BY status").execute())
                            .flatMap(result -> result.map((row, meta) -> row.get(0, String.class) + "="
                                    + row.get(1, Long.class))), Connection::close)
                    .collectList()
                    .block(Duration.ofSeconds(30));
        }

        private long countSafely(String sql, Object... args) {
            try {
                return count(harness, sql, args);
            } catch (RuntimeException e) {
                return Long.MAX_VALUE;
            }
        }

        // ---- workload ---------------------------------------------------------------------------

        private Thread loop(String name, long everyMillis, Runnable body) {
            Thread thread = new Thread(() -> {
                while (loading) {
                    try {
                        body.run();
                    } catch (RuntimeException e) {
                        tally(name + " errors", 1);
                    }
                    sleep(everyMillis);
                }
            }, name);
            thread.setDaemon(true);
            return thread;
        }

        private void insertSome() {
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                requests.add(ChaosWorkload.randomJob());
            }
            requests.add(ChaosWorkload.randomFlow());
            List<Long> ids = producer.insertAll(requests).block(Duration.ofSeconds(20));
            tally("inserted", ids.size());
            remember(recentIds, ids.subList(0, 4));
            remember(recentFlows, ids.subList(4, 5));
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
                    producer.cancel(id, random.nextBoolean()).block(Duration.ofSeconds(20));
                    tally("cancels", 1);
                } else {
                    producer.signal(id, ChaosWorkload.GO, Map.of("n", random.nextInt(100)),
                            "go-" + id + "-" + random.nextInt(3)).block(Duration.ofSeconds(20));
                    tally("signals", 1);
                }
            } catch (NoTargetException settled) {
                tally("signals to settled", 1);
            }
        }

        private void sample() {
            tally("key samples", 1);
            tally("key overlap samples", count(harness, ChaosSchema.keyOverlapSample(schema)));
        }

        // ---- faults -----------------------------------------------------------------------------

        private void inject(Fault fault) {
            switch (fault) {
                case TERMINATE -> terminate();
                case ENGINE -> replaceEngine();
                case JVM -> {
                    if (killJvm()) {
                        startJvm();
                    }
                }
                case RESTART -> {
                    if (server.restartable()) {
                        long started = System.nanoTime();
                        server.restart();
                        tally("fault restart", 1);
                        log.accept("chaos: PostgreSQL restarted in "
                                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + " ms");
                    } else {
                        terminate();
                    }
                }
            }
        }

        /** A burst of pg_terminate_backend on Durable's backends, busy ones first. */
        private void terminate() {
            long terminated = 0;
            for (int i = 0; i < 5; i++) {
                terminated += count(harness, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM ("
                        + "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                        + " AND application_name = $1 AND pid <> pg_backend_pid()"
                        + " ORDER BY (state = 'active') DESC, random() LIMIT $2) p) t",
                        ENGINE_APP, 1 + ThreadLocalRandom.current().nextInt(2));
                sleep(20 + ThreadLocalRandom.current().nextInt(40));
            }
            tally("fault terminate", 1);
            tally("backends terminated", terminated);
        }

        /** Disposes an engine's pool under it (no drain, nothing released), then starts a new incarnation. */
        private void replaceEngine() {
            Slot slot = slots.get(ThreadLocalRandom.current().nextInt(slots.size()));
            DurableEngine old = slot.engine;
            slot.pool.dispose();
            // Stops its loops; its buffered rows cannot be released and its runs cannot commit any more.
            old.closeLater().subscribe(null, error -> tally("zombie close errors", 1));
            zombies.add(old);
            slot.generation++;
            startSlot(slot);
            tally("fault engine", 1);
        }

        private void startSlot(Slot slot) {
            String label = "e" + slot.index + "g" + slot.generation;
            retry("start engine " + label, () -> {
                ConnectionPool pool = pool(server.url, ENGINE_APP, 8);
                DurableEngine.Builder builder = DurableEngine.builder(
                        engineOptions(pool, schema, "chaos-e" + slot.index).build());
                for (Definition definition : new ChaosWorkload(label, harness, schema).definitions()) {
                    builder.register(definition);
                }
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
            retry("register " + label, () -> registerWorkers(harness, schema, label, slot.engine));
        }

        private void startJvm() {
            String label = "jvm" + (jvmCount++);
            List<String> command = List.of(javaBinary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-cp", classpath(), ChaosWorker.class.getName(), server.url, schema, label);
            try {
                jvm = new ProcessBuilder(command)
                        .redirectErrorStream(true)
                        .redirectOutput(logDirectory.resolve(label + ".log").toFile())
                        .start();
            } catch (IOException e) {
                throw new UncheckedIOException("worker JVM did not start", e);
            }
            tally("worker JVMs started", 1);
        }

        /**
         * Waits (a while) for the worker JVM to be registered and in the middle of a step, then kills
         * it with SIGKILL. Says whether it killed one.
         */
        private boolean killJvm() {
            Process process = jvm;
            if (process == null) {
                return false;
            }
            String label = "jvm" + (jvmCount - 1);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            boolean midStep = false;
            while (System.nanoTime() < deadline && process.isAlive()) {
                long registered = countSafely("SELECT count(*) FROM \"" + schema + "\".chaos_workers WHERE label = $1",
                        label);
                long running = countSafely("SELECT count(*) FROM \"" + schema + "\".chaos_exec WHERE label = $1"
                        + " AND ended_at IS NULL", label);
                if (registered > 0 && registered != Long.MAX_VALUE && running > 0 && running != Long.MAX_VALUE) {
                    midStep = true;
                    break;
                }
                sleep(50);
            }
            if (!process.isAlive()) {
                notes.add("worker JVM " + label + " exited by itself with " + process.exitValue()
                        + " (see " + logDirectory.resolve(label + ".log") + ")");
            }
            process.destroyForcibly();
            try {
                process.waitFor(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            jvm = null;
            tally("fault jvm", 1);
            tally(midStep ? "worker JVMs killed mid-step" : "worker JVMs killed idle", 1);
            return true;
        }

        @Override
        public void close() {
            if (jvm != null) {
                jvm.destroyForcibly();
            }
            List<Mono<Void>> closing = new ArrayList<>();
            for (Slot slot : slots) {
                if (slot.engine != null) {
                    closing.add(slot.engine.closeLater().onErrorResume(e -> Mono.empty()));
                }
            }
            closing.add(producer.closeLater().onErrorResume(e -> Mono.empty()));
            for (DurableEngine zombie : zombies) {
                closing.add(zombie.closeLater().onErrorResume(e -> Mono.empty()));
            }
            try {
                Mono.when(closing).block(Duration.ofSeconds(60));
            } catch (RuntimeException ignored) {
                // Best effort: the server goes away next.
            }
            for (Slot slot : slots) {
                if (slot.pool != null) {
                    slot.pool.dispose();
                }
            }
            producerPool.dispose();
            harness.dispose();
        }
    }

    static String javaBinary() {
        return ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    }

    /**
     * The test classpath: the class loader's URLs under exec:java (which runs inside Maven's JVM),
     * else java.class.path (under Surefire/Failsafe a manifest-only jar whose Class-Path is followed).
     */
    static String classpath() {
        Set<String> entries = new LinkedHashSet<>();
        for (ClassLoader loader = Chaos.class.getClassLoader(); loader != null; loader = loader.getParent()) {
            if (loader instanceof URLClassLoader urls) {
                for (URL url : urls.getURLs()) {
                    try {
                        entries.add(new File(url.toURI()).getPath());
                    } catch (Exception ignored) {
                        // Not a file URL: not on a classpath we can pass on.
                    }
                }
            }
        }
        boolean ours = entries.stream().anyMatch(entry -> entry.contains("test-classes"));
        return ours ? String.join(File.pathSeparator, entries) : System.getProperty("java.class.path");
    }
}
