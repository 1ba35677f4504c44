package dev.durable.benchmarks.shootout;

import com.sun.management.OperatingSystemMXBean;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Measures the structural cost of a window: what the server and the harness spent on it, which
 * stays readable when other work on the machine makes the wall clock noisy.
 *
 * <ul>
 *   <li><b>PostgreSQL CPU</b>: {@link ServerCpu} (user + system time of the server's processes
 *       from {@code /proc}, the probe backend left out); n/a when the server is not local.
 *   <li><b>JVM CPU</b>: {@code OperatingSystemMXBean.getProcessCpuTime()} of this process: the
 *       contender's threads, the inserting thread, JIT and GC.
 *   <li><b>WAL bytes</b>: {@code pg_wal_lsn_diff} of {@code pg_current_wal_insert_lsn()} at both ends.
 *   <li><b>Index writes</b>: b-tree WAL records that add an index entry, from {@code pg_walinspect}'s
 *       {@code pg_get_wal_stats(start, end, per_record => true)}: {@code INSERT_LEAF} (an entry
 *       into a leaf page), {@code INSERT_POST} (an entry that splits a posting list) and
 *       {@code SPLIT_L}/{@code SPLIT_R} (a page split, logged with the entry whose insert caused
 *       it). Not counted: {@code INSERT_UPPER} and {@code NEWROOT} (downlinks after a split),
 *       {@code DEDUP} (a merge of existing entries), {@code DELETE}/{@code VACUUM} (removals).
 *   <li><b>Statements</b>: the sum of {@code calls} in {@code pg_stat_statements} (top level,
 *       utility statements such as BEGIN and COMMIT included), reset at the window's start,
 *       leaving out the harness's own statements (marked with {@link Target#PROBE_MARK}).
 * </ul>
 *
 * A window starts with a {@code CHECKPOINT}, so each one pays the same full-page images (the
 * first change of every page after it) and no checkpoint falls inside it on the embedded server.
 * A figure the server cannot give is NaN, and the reason goes to standard error once.
 */
final class CostMeter {

    /** The b-tree record types that add an index entry (see the class comment). */
    static final Set<String> INDEX_ENTRY_RECORDS =
            Set.of("Btree/INSERT_LEAF", "Btree/INSERT_POST", "Btree/SPLIT_L", "Btree/SPLIT_R");

    /**
     * Where the next WAL record goes. Not {@code pg_current_wal_lsn()}: that is the write position,
     * which trails the inserts by up to {@code wal_writer_delay} under {@code synchronous_commit=off}
     * and would cut the end of a short window off.
     */
    private static final String INSERT_LSN = "SELECT pg_current_wal_insert_lsn()";

    private final Target target;
    private final @Nullable ServerCpu serverCpu;
    private final OperatingSystemMXBean os =
            ManagementFactory.getPlatformMXBean(OperatingSystemMXBean.class);
    private final CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
    private boolean statements;
    /**
     * pg_stat_statements counts plans: its track_planning is on (-Dshootout.trackPlanning=true on the
     * embedded server; the server's own setting under DURABLE_PG_URL).
     */
    private boolean planning;
    private boolean walInspect;
    private boolean wal;
    private boolean checkpoint;

    private CostMeter(Target target, @Nullable ServerCpu serverCpu) {
        this.target = target;
        this.serverCpu = serverCpu;
    }

    /** Sets up the extensions it can, and says on standard error which columns will be n/a. */
    static CostMeter open(Target target) {
        CostMeter meter = new CostMeter(target, ServerCpu.find(target));
        meter.statements = meter.tryRun("statements_per_job", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
                "SELECT count(*) FROM pg_stat_statements", "SELECT pg_stat_statements_reset()");
        meter.planning = meter.statements && "on".equals(target.queryStrings(
                "SELECT current_setting('pg_stat_statements.track_planning', true)").get(0));
        meter.wal = meter.tryRun("wal_bytes_per_job", INSERT_LSN);
        meter.walInspect = meter.wal && meter.tryRun("index_writes_per_job",
                "CREATE EXTENSION IF NOT EXISTS pg_walinspect",
                "SELECT 'pg_get_wal_stats(pg_lsn, pg_lsn, boolean)'::regprocedure");
        if (meter.walInspect && target.queryLong("SELECT has_function_privilege("
                + "'pg_get_wal_stats(pg_lsn, pg_lsn, boolean)', 'EXECUTE')::int") == 0) {
            Shootout.log("index_writes_per_job: n/a: this user may not run pg_get_wal_stats"
                    + " (superuser or pg_read_server_files)");
            meter.walInspect = false;
        }
        meter.checkpoint = meter.tryRun("checkpoint before each window", "CHECKPOINT");
        if (!meter.jit.isCompilationTimeMonitoringSupported()) {
            Shootout.log("jit: this JVM does not report compilation time; the warm-up runs its minimum passes");
        }
        return meter;
    }

    private boolean tryRun(String what, String... statements) {
        try {
            target.execute(statements);
            return true;
        } catch (RuntimeException e) {
            Shootout.log("%s: n/a: %s", what, firstLine(e.getMessage()));
            return false;
        }
    }

    /** Milliseconds the JIT compilers have spent so far; 0 if the JVM does not say. */
    long jitMillis() {
        return jit.isCompilationTimeMonitoringSupported() ? jit.getTotalCompilationTime() : 0;
    }

    /** The server's CPU time so far in nanoseconds, -1 when it is not local; for per-second logs. */
    long serverCpuNanos() {
        return serverCpu == null ? -1 : serverCpu.sampleNanos();
    }

    /** This process's CPU time so far, in nanoseconds. */
    long processCpuNanos() {
        return os.getProcessCpuTime();
    }

    /** Milliseconds the garbage collectors have spent so far. */
    long collectorMillis() {
        return gcMillis();
    }

    /** Starts counting statements afresh (a load phase's, outside any window), where it can. */
    void resetStatements() {
        if (statements) {
            target.execute("SELECT pg_stat_statements_reset()");
        }
    }

    /** Logs the five costliest statements since the last reset, per job of {@code jobs}. */
    void logStatements(long jobs, String label) {
        if (statements) {
            logTopStatements(jobs, label);
        }
    }

    /** Where a window starts: checkpoint and reset first, then the readings. Call before the clock starts. */
    Window begin() {
        if (checkpoint) {
            target.execute("CHECKPOINT");
        }
        if (statements) {
            target.execute("SELECT pg_stat_statements_reset()");
        }
        String lsn = wal ? target.queryStrings(INSERT_LSN).get(0) : null;
        long pgCpu = serverCpu == null ? -1 : serverCpu.sampleNanos();
        return new Window(os.getProcessCpuTime(), pgCpu, lsn, jitMillis(), gcMillis());
    }

    /** The costs per job since {@code window} began; logs the breakdown. Call after the clock stops. */
    Costs end(Window window, long jobs, String label) {
        long jvmCpu = os.getProcessCpuTime() - window.jvmCpuNanos();
        double pgCpuMicros = serverCpu == null ? Double.NaN : (serverCpu.sampleNanos() - window.pgCpuNanos()) / 1e3 / jobs;
        long jitMillis = jitMillis() - window.jitMillis();
        long gcMillis = gcMillis() - window.gcMillis();
        String endLsn = wal ? target.queryStrings(INSERT_LSN).get(0) : null;
        double statementsPerJob = Double.NaN;
        if (statements) {
            statementsPerJob = target.queryLong("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements"
                    + " WHERE query NOT LIKE '%" + Target.PROBE_MARK + "%'") / (double) jobs;
            logTopStatements(jobs, label);
        }
        double walBytes = Double.NaN;
        double indexWrites = Double.NaN;
        if (window.lsn() != null && endLsn != null) {
            walBytes = target.queryLong("SELECT pg_wal_lsn_diff('" + endLsn + "', '" + window.lsn() + "')::bigint")
                    / (double) jobs;
            if (walInspect) {
                indexWrites = indexWrites(window.lsn(), endLsn, jobs, label);
            }
        }
        Shootout.log("%s: window JVM: %.1f us/job CPU, JIT %d ms, GC %d ms", label,
                jvmCpu / 1e3 / jobs, jitMillis, gcMillis);
        return new Costs(pgCpuMicros, jvmCpu / 1e3 / jobs, jitMillis * 1e3 / jobs, walBytes, indexWrites,
                statementsPerJob);
    }

    /**
     * Index entries written per job; logs the window's WAL by record type. pg_walinspect reads
     * flushed WAL only, and with {@code synchronous_commit=off} the walwriter flushes only up to
     * the last asynchronous commit: a small transaction of the probe's that commits synchronously
     * flushes everything before it, the window's end included.
     */
    private double indexWrites(String startLsn, String endLsn, long jobs, String label) {
        try {
            flushWal();
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (target.queryLong("SELECT (pg_current_wal_flush_lsn() >= '" + endLsn + "')::int") == 0) {
                if (System.nanoTime() > deadline) {
                    Shootout.log("%s: index_writes: WAL not flushed to %s after 10 s; n/a", label, endLsn);
                    return Double.NaN;
                }
                Thread.sleep(20);
            }
            List<String[]> rows = target.queryRows("SELECT \"resource_manager/record_type\", count, record_size,"
                    + " fpi_size FROM pg_get_wal_stats('" + startLsn + "', '" + endLsn + "', true) WHERE count > 0");
            long entries = 0;
            long fpiBytes = 0;
            List<String[]> sorted = new ArrayList<>(rows);
            sorted.sort(Comparator.comparingLong((String[] row) -> Long.parseLong(row[2]) + Long.parseLong(row[3]))
                    .reversed());
            StringBuilder breakdown = new StringBuilder();
            for (String[] row : sorted) {
                if (INDEX_ENTRY_RECORDS.contains(row[0])) {
                    entries += Long.parseLong(row[1]);
                }
                fpiBytes += Long.parseLong(row[3]);
                if (breakdown.length() < 600) {
                    breakdown.append(String.format(Locale.ROOT, "%s%s %.2f (%.0f B)", breakdown.length() == 0 ? "" : ", ",
                            row[0], Long.parseLong(row[1]) / (double) jobs,
                            (Long.parseLong(row[2]) + Long.parseLong(row[3])) / (double) jobs));
                }
            }
            Shootout.log("%s: WAL records per job (bytes per job), largest first; full-page images %.0f B/job: %s",
                    label, fpiBytes / (double) jobs, breakdown);
            return entries / (double) jobs;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Double.NaN;
        } catch (RuntimeException e) {
            Shootout.log("%s: index_writes: n/a: %s", label, firstLine(e.getMessage()));
            return Double.NaN;
        }
    }

    private void flushWal() {
        try {
            target.execute("BEGIN", "SET LOCAL synchronous_commit = on", "SELECT pg_current_xact_id()", "COMMIT");
        } catch (RuntimeException e) {
            target.execute("ROLLBACK");
            throw e;
        }
    }

    /**
     * The five statements that took the most server time in the window, for the log, with the buffers
     * each read per job (hit or read): time on a shared machine includes waiting for a core, buffers do not.
     */
    private void logTopStatements(long jobs, String label) {
        List<String[]> rows = target.queryRows("SELECT calls, total_exec_time, rows, shared_blks_hit + shared_blks_read,"
                + " plans, total_plan_time, left(regexp_replace(query,"
                + " '\\s+', ' ', 'g'), 110) FROM pg_stat_statements WHERE query NOT LIKE '%" + Target.PROBE_MARK + "%'"
                + " ORDER BY total_exec_time DESC LIMIT 5");
        for (String[] row : rows) {
            long calls = Long.parseLong(row[0]);
            String planned = !planning ? "planning n/a" : String.format(Locale.ROOT,
                    "%.2f plans/call, %.1f us planning/job", Long.parseLong(row[4]) / (double) Math.max(1, calls),
                    Double.parseDouble(row[5]) * 1e3 / jobs);
            Shootout.log("%s: statement %.3f calls/job, %.1f us/job, %.1f buffers/job, %.1f rows/call, %s: %s", label,
                    calls / (double) jobs, Double.parseDouble(row[1]) * 1e3 / jobs, Long.parseLong(row[3]) / (double) jobs,
                    Long.parseLong(row[2]) / (double) Math.max(1, calls), planned, row[6]);
        }
    }

    private static long gcMillis() {
        long total = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, gc.getCollectionTime());
        }
        return total;
    }

    private static String firstLine(@Nullable String message) {
        if (message == null) {
            return "(no message)";
        }
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }

    /** The readings at a window's start. */
    record Window(long jvmCpuNanos, long pgCpuNanos, @Nullable String lsn, long jitMillis, long gcMillis) {
    }
}
