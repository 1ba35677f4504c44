package dev.durable.benchmarks.shootout;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The side-by-side harness of issues 9 and 16: raw_sql (the ceiling), durable, db_scheduler and
 * jobrunr, one at a time against one PostgreSQL, with the same job count, the same no-op handler
 * and the same connection budget. Standard output carries only the RESULT lines and the RATIO
 * line; progress and breakdowns go to standard error.
 *
 * <p>The run is {@code --rounds} rounds; each round runs every selected system through the same
 * {@link Protocol} (warm-up at parity, idle latency, throughput window with its {@link Costs}),
 * in the given order in odd rounds and in reverse in even ones, so no system always runs first on
 * a cold machine or last on a hot one. Each round prints a RESULT line per system; then each
 * system gets a RESULT line of medians ({@code round=median}), and the RATIO line gives the median
 * over rounds of durable's jobs/s divided by each peer's in the same round.
 *
 * <p>{@code --mode sustained} runs each system through the {@link SustainedProtocol} instead: a
 * fixed time at saturation with inserts streaming in (the RESULT line is its steady window), then
 * open-loop arrivals at shares of that rate (a LOAD line each); one round unless told. The RATIO
 * line then compares the steady windows. {@code --profile durable} runs either mode against a
 * server with {@code fsync} and {@code synchronous_commit} on ({@link Target.Profile}).
 *
 * <pre>
 * benchmarks/shootout [--mode short|sustained] [--profile fast|durable] [--connections B]
 *                     [--systems raw_sql,durable,...] [--rounds R]
 *                     short:     [--jobs N] [--warmup-jobs W] [--latency-jobs M]
 *                     sustained: [--seconds S] [--steady-seconds T] [--load-seconds L] [--load-shares 0.5,0.8]
 * </pre>
 */
public final class Shootout {

    static final int DEFAULT_JOBS = 20_000;
    static final int DEFAULT_ROUNDS = 3;
    static final int DEFAULT_LATENCY_JOBS = 300;
    static final int DEFAULT_CONNECTIONS = 20;
    static final List<String> ALL = List.of("raw_sql", "durable", "db_scheduler", "jobrunr");
    /**
     * Systems run only when named: durable with trace context followed (README "Tracing"), and with its
     * no-op as a transactional handler (docs/jobs.md, "Exactly-once effects in your database").
     */
    static final List<String> OPTIONAL = List.of("durable_traced", "durable_tx");
    static final List<String> PEERS = List.of("raw_sql", "db_scheduler", "jobrunr");
    static final int DEFAULT_SECONDS = 60;
    static final int DEFAULT_STEADY_SECONDS = 45;
    static final int DEFAULT_LOAD_SECONDS = 20;
    static final List<Double> DEFAULT_LOAD_SHARES = List.of(0.5, 0.8);
    static final String USAGE = "usage: shootout [--mode short|sustained] [--profile fast|durable] [--connections B]"
            + " [--systems " + String.join(",", ALL) + "] [--rounds R (default 3 short, 1 sustained)]"
            + " short: [--jobs N] [--warmup-jobs W (default N)] [--latency-jobs M]"
            + " sustained: [--seconds S (default 60)] [--steady-seconds T (default 45)] [--load-seconds L (default 20)]"
            + " [--load-shares 0.5,0.8]";

    /**
     * The run's settings; {@code warmupJobs} is the job count of one warm-up pass (short mode);
     * {@code seconds}, {@code steadySeconds}, {@code loadSeconds} and {@code loadShares} are the
     * sustained mode's.
     */
    record Config(boolean sustained, Target.Profile profile, int jobs, int warmupJobs, int rounds, int latencyJobs,
            int connections, List<String> systems, int seconds, int steadySeconds, int loadSeconds,
            List<Double> loadShares) {
    }

    private Shootout() {
    }

    public static void main(String[] args) throws Exception {
        Config config = parse(args);
        log("shootout: mode=%s profile=%s jobs=%d warmup_jobs=%d rounds=%d latency_jobs=%d connections=%d"
                        + " systems=%s seconds=%d steady_seconds=%d load_seconds=%d load_shares=%s cores=%d",
                config.sustained() ? "sustained" : "short", config.profile().label(), config.jobs(),
                config.warmupJobs(), config.rounds(), config.latencyJobs(), config.connections(), config.systems(),
                config.seconds(), config.steadySeconds(), config.loadSeconds(), config.loadShares(),
                Runtime.getRuntime().availableProcessors());
        Map<String, List<Result>> bySystem = new LinkedHashMap<>();
        List<Map<String, Result>> rounds = new ArrayList<>();
        List<SustainedProtocol.Load> loads = new ArrayList<>();
        try (Target target = Target.open(config.profile())) {
            // The harness's backend pid: its parent is the server (benchmarks/pg-profile samples its children).
            log("postgres: %s; %s; fsync=%s synchronous_commit=%s full_page_writes=%s shared_buffers=%s"
                            + " max_connections=%s shared_preload_libraries=%s; harness backend pid %d",
                    target.queryStrings("SELECT version()").get(0),
                    target.embedded ? "embedded, started by the shootout" : "DURABLE_PG_URL",
                    target.setting("fsync"), target.setting("synchronous_commit"),
                    target.setting("full_page_writes"), target.setting("shared_buffers"),
                    target.setting("max_connections"), target.setting("shared_preload_libraries"),
                    target.queryLong("SELECT pg_backend_pid()"));
            CostMeter meter = CostMeter.open(target);
            Protocol protocol = new Protocol(target, meter, config);
            SustainedProtocol sustained = new SustainedProtocol(target, meter, config);
            for (int round = 1; round <= config.rounds(); round++) {
                List<String> order = new ArrayList<>(config.systems());
                if (round % 2 == 0) {
                    Collections.reverse(order);
                }
                log("round %d of %d: %s", round, config.rounds(), order);
                Map<String, Result> results = new LinkedHashMap<>();
                for (String system : order) {
                    Contender contender = create(system, target, config);
                    Result result;
                    if (config.sustained()) {
                        SustainedProtocol.Outcome outcome = sustained.run(contender, round);
                        result = outcome.saturation();
                        loads.addAll(outcome.loads());
                    } else {
                        result = protocol.run(contender, round);
                    }
                    results.put(system, result);
                    bySystem.computeIfAbsent(system, s -> new ArrayList<>()).add(result);
                    System.out.println(result.line());
                    System.out.flush();
                }
                rounds.add(results);
            }
        }
        for (List<Result> results : bySystem.values()) {
            System.out.println(Result.median(results).line());
        }
        for (SustainedProtocol.Load load : loads) {
            System.out.println(load.line());
        }
        StringBuilder ratios = new StringBuilder("RATIO");
        for (String peer : PEERS) {
            ratios.append(" durable/").append(peer).append('=').append(Costs.format(medianRatio(rounds, peer), "%.2f"));
        }
        System.out.println(ratios);
        System.out.flush();
        // Peers leave non-daemon threads behind (JobRunr's, Hikari's housekeepers): end here.
        System.exit(0);
    }

    /** The median over rounds of durable's jobs/s over the peer's in the same round; NaN without both. */
    static double medianRatio(List<Map<String, Result>> rounds, String peer) {
        List<Double> ratios = new ArrayList<>();
        for (Map<String, Result> round : rounds) {
            Result durable = round.get("durable");
            Result other = round.get(peer);
            if (durable != null && other != null) {
                ratios.add(durable.jobsPerSecond() / other.jobsPerSecond());
            }
        }
        return Costs.median(ratios.stream().mapToDouble(Double::doubleValue).toArray());
    }

    static Contender create(String system, Target target, Config config) {
        return switch (system) {
            case "raw_sql" -> new RawSqlContender(target, config.connections());
            case "durable" -> new DurableContender(target, config.connections());
            // Not among the defaults: what following trace context costs per job (README "Tracing").
            case "durable_traced" -> new DurableContender(target, config.connections(),
                    DurableContender.Variant.TRACED);
            // Not among the defaults: what a transactional handler costs per job (docs/jobs.md).
            case "durable_tx" -> new DurableContender(target, config.connections(),
                    DurableContender.Variant.TRANSACTIONAL);
            case "db_scheduler" -> new DbSchedulerContender(target, config.connections());
            case "jobrunr" -> new JobRunrContender(target, config.connections());
            default -> throw new IllegalArgumentException("unknown system " + system + "; known: " + ALL);
        };
    }

    static Config parse(String[] args) {
        boolean sustained = false;
        Target.Profile profile = Target.Profile.FAST;
        int seconds = DEFAULT_SECONDS;
        int steadySeconds = DEFAULT_STEADY_SECONDS;
        int loadSeconds = DEFAULT_LOAD_SECONDS;
        List<Double> loadShares = DEFAULT_LOAD_SHARES;
        int jobs = DEFAULT_JOBS;
        int warmupJobs = 0;
        int rounds = 0;
        int latencyJobs = DEFAULT_LATENCY_JOBS;
        int connections = DEFAULT_CONNECTIONS;
        List<String> systems = ALL;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (arg) {
                case "--mode" -> sustained = switch (require(arg, value)) {
                    case "short" -> false;
                    case "sustained" -> true;
                    default -> throw new IllegalArgumentException("--mode must be short or sustained, was " + value);
                };
                case "--profile" -> profile = Target.Profile.parse(require(arg, value));
                case "--seconds" -> seconds = positive(arg, value);
                case "--steady-seconds" -> steadySeconds = positive(arg, value);
                case "--load-seconds" -> loadSeconds = positive(arg, value);
                case "--load-shares" -> loadShares = shares(arg, require(arg, value));
                case "--jobs" -> jobs = positive(arg, value);
                case "--warmup-jobs" -> warmupJobs = positive(arg, value);
                case "--rounds" -> rounds = positive(arg, value);
                case "--latency-jobs" -> latencyJobs = positive(arg, value);
                case "--connections" -> connections = positive(arg, value);
                case "--systems" -> systems = List.of(require(arg, value).split(","));
                case "-h", "--help" -> {
                    System.err.println(USAGE);
                    System.exit(0);
                }
                default -> throw new IllegalArgumentException("unknown argument " + arg);
            }
            i++;
        }
        for (String system : systems) {
            if (!ALL.contains(system) && !OPTIONAL.contains(system)) {
                throw new IllegalArgumentException("unknown system " + system + "; known: " + ALL);
            }
        }
        if (connections < 4) {
            throw new IllegalArgumentException("--connections must be at least 4, was " + connections);
        }
        if (steadySeconds >= seconds) {
            throw new IllegalArgumentException("--steady-seconds (" + steadySeconds + ") must be less than --seconds ("
                    + seconds + "): the time before the steady window is the warm-up");
        }
        if (rounds == 0) {
            rounds = sustained ? 1 : DEFAULT_ROUNDS;
        }
        // Parity by default: a warm-up pass is as long as the window it warms up for.
        return new Config(sustained, profile, jobs, warmupJobs == 0 ? jobs : warmupJobs, rounds, latencyJobs,
                connections, systems, seconds, steadySeconds, loadSeconds, loadShares);
    }

    /** Comma-separated shares of the saturated rate, each above 0 and at most 1. */
    private static List<Double> shares(String option, String value) {
        List<Double> shares = new ArrayList<>();
        for (String part : value.split(",")) {
            double share;
            try {
                share = Double.parseDouble(part.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(option + " must be numbers between 0 and 1, was " + value);
            }
            if (!(share > 0 && share <= 1)) {
                throw new IllegalArgumentException(option + " must be numbers between 0 and 1, was " + value);
            }
            shares.add(share);
        }
        return List.copyOf(shares);
    }

    private static String require(String option, String value) {
        if (value == null) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return value;
    }

    /** {@code value} as a positive integer, or an error naming {@code option}. */
    static int positive(String option, String value) {
        int n;
        try {
            n = Integer.parseInt(require(option, value));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(option + " must be a positive integer, was " + value);
        }
        if (n < 1) {
            throw new IllegalArgumentException(option + " must be a positive integer, was " + value);
        }
        return n;
    }

    static void log(String format, Object... args) {
        System.err.println("[shootout] " + String.format(Locale.ROOT, format, args));
        System.err.flush();
    }
}
