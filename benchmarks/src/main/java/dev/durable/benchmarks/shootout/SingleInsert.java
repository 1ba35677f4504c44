package dev.durable.benchmarks.shootout;

import com.github.kagkarlsson.scheduler.SchedulerClient;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariDataSource;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.LongConsumer;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The round trip of one insert (issue 16): Durable's {@code insert} of one job (R2DBC, its own pool)
 * beside db-scheduler's {@code SchedulerClient.schedule} of one execution (JDBC over HikariCP), on one
 * PostgreSQL (the shootout's embedded server, or {@code DURABLE_PG_URL}). One caller, one call at a
 * time; neither system runs a scheduler, so nothing but the inserts touches their tables. Each system
 * warms up with {@code calls} inserts, then the rounds alternate the order. Standard output carries one
 * RESULT line per system over all measured calls: the call's wall-clock percentiles, the harness JVM's CPU
 * per call (the system's client code, its driver and pool), and from {@code pg_stat_statements} the
 * statements the server ran per call and their mean execution time (top level, the probe's own left out;
 * n/a on a server without the extension). On a loaded machine read the CPU and server columns first.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.durable.benchmarks.shootout.SingleInsert [calls per round, 2000] [rounds, 5]
 * RESULT name=durable calls=10000 p50_ms=... p90_ms=... p99_ms=... mean_ms=... jvm_cpu_us_per_call=... statements_per_call=... server_exec_us_per_call=...
 * </pre>
 */
public final class SingleInsert {

    private static final Duration WAIT = Duration.ofMinutes(1);
    private static final String DURABLE_SCHEMA = "single_durable";
    private static final String DBS_SCHEMA = "single_dbs";
    private static final com.sun.management.OperatingSystemMXBean PROCESS =
            (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();

    private SingleInsert() {
    }

    public static void main(String[] args) {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 2_000;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        try (Target target = Target.open(Target.Profile.FAST)) {
            DurableEngine engine = DurableEngine.builder(EngineOptions.builder().url(target.r2dbcUrl)
                            .schema(DURABLE_SCHEMA).name("single").poolMaxSize(4).build())
                    .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty()).queue("single"))
                    .build();
            engine.migrate().block(WAIT);
            DbSchedulerContender.createTable(target, DBS_SCHEMA);
            OneTimeTask<Void> task = Tasks.oneTime("noop").execute((instance, context) -> { });
            HikariDataSource dataSource = DbSchedulerContender.Jdbc.pool(target, "single-insert", 4);
            SchedulerClient client = SchedulerClient.Builder.create(dataSource, task)
                    .tableName(DBS_SCHEMA + ".scheduled_tasks").build();
            try {
                long[] seq = {0};
                LongConsumer durable = n -> engine.insert(JobRequest.of("noop", n)).block(WAIT);
                LongConsumer dbScheduler = n -> client.schedule(task.instance(Long.toString(n)), Instant.now());
                time(durable, calls, seq, null, 0);
                time(dbScheduler, calls, seq, null, 1);
                boolean statements = statementsTracked(target);
                List<long[]> durableRounds = new ArrayList<>();
                List<long[]> dbsRounds = new ArrayList<>();
                long[] cpu = new long[2];
                double[][] server = new double[2][2];
                for (int round = 1; round <= rounds; round++) {
                    for (int turn = 0; turn < 2; turn++) {
                        int system = (round + turn) % 2 == 1 ? 0 : 1;
                        if (statements) {
                            target.execute("SELECT pg_stat_statements_reset()");
                        }
                        (system == 0 ? durableRounds : dbsRounds).add(
                                time(system == 0 ? durable : dbScheduler, calls, seq, cpu, system));
                        if (statements) {
                            String[] totals = target.queryRows("SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0)"
                                    + " FROM pg_stat_statements WHERE query NOT LIKE '%" + Target.PROBE_MARK + "%'"
                                    + " AND query NOT LIKE '%pg_stat_statements%'").get(0);
                            server[system][0] += Double.parseDouble(totals[0]);
                            server[system][1] += Double.parseDouble(totals[1]);
                            if (round == rounds) {
                                Shootout.log("single insert: %s's statements in the last round: %s",
                                        system == 0 ? "durable" : "db_scheduler", target.queryRows(
                                        "SELECT calls || ' x ' || round(mean_exec_time::numeric * 1000) || ' us: '"
                                                + " || left(regexp_replace(query, '\\s+', ' ', 'g'), 120)"
                                                + " FROM pg_stat_statements WHERE query NOT LIKE '%" + Target.PROBE_MARK
                                                + "%' AND query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC LIMIT 4")
                                        .stream().map(row -> row[0]).toList());
                            }
                        }
                    }
                    Shootout.log("single insert round %d: durable p50 %.3f ms, db_scheduler p50 %.3f ms", round,
                            percentile(durableRounds.get(round - 1), 50), percentile(dbsRounds.get(round - 1), 50));
                }
                report("durable", durableRounds, cpu[0], statements ? server[0] : null);
                report("db_scheduler", dbsRounds, cpu[1], statements ? server[1] : null);
                Shootout.log("single insert: rows inserted: durable %d, db_scheduler %d (%d calls each)",
                        target.queryLong("SELECT count(*) FROM " + DURABLE_SCHEMA + ".durable_instances"),
                        target.queryLong("SELECT count(*) FROM " + DBS_SCHEMA + ".scheduled_tasks"), calls * (rounds + 1));
            } finally {
                engine.closeLater().block(WAIT);
                dataSource.close();
            }
        }
    }

    /**
     * Nanoseconds of each of {@code calls} inserts, one after the other; the process CPU they took is added
     * to {@code cpu[slot]} when {@code cpu} is given.
     */
    private static long[] time(LongConsumer insert, int calls, long[] seq, long @Nullable [] cpu, int slot) {
        long cpuBefore = PROCESS.getProcessCpuTime();
        long[] nanos = new long[calls];
        for (int i = 0; i < calls; i++) {
            long start = System.nanoTime();
            insert.accept(++seq[0]);
            nanos[i] = System.nanoTime() - start;
        }
        if (cpu != null) {
            cpu[slot] += PROCESS.getProcessCpuTime() - cpuBefore;
        }
        return nanos;
    }

    private static boolean statementsTracked(Target target) {
        try {
            target.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()");
            return true;
        } catch (RuntimeException unavailable) {
            Shootout.log("single insert: no pg_stat_statements (%s): statements per call n/a", unavailable.getMessage());
            return false;
        }
    }

    private static void report(String name, List<long[]> rounds, long cpuNanos, double @Nullable [] server) {
        long[] all = rounds.stream().flatMapToLong(Arrays::stream).toArray();
        double mean = Arrays.stream(all).average().orElse(0) / 1e6;
        System.out.println(String.format(Locale.ROOT, "RESULT name=%s calls=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f"
                        + " mean_ms=%.3f jvm_cpu_us_per_call=%.1f statements_per_call=%s server_exec_us_per_call=%s",
                name, all.length, percentile(all, 50), percentile(all, 90), percentile(all, 99), mean,
                cpuNanos / 1e3 / all.length,
                server == null ? "n/a" : String.format(Locale.ROOT, "%.2f", server[0] / all.length),
                server == null ? "n/a" : String.format(Locale.ROOT, "%.1f", server[1] * 1000 / all.length)));
    }

    /** Nearest rank, in milliseconds. */
    private static double percentile(long[] nanos, double p) {
        long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        int rank = (int) Math.ceil(p / 100 * sorted.length);
        return sorted[Math.max(0, rank - 1)] / 1e6;
    }
}
