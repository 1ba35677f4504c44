package dev.durable.benchmarks.shootout;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * The CPU time a PostgreSQL server on this machine has used, from {@code /proc}: the postmaster
 * and every process it forked (backends, walwriter, checkpointer, background writer, autovacuum
 * launcher and workers, parallel workers), less the harness's own probe backend.
 *
 * <p>A backend that exits inside a window is not lost: when the postmaster reaps it, the kernel
 * adds its time to the postmaster's {@code cutime}/{@code cstime}, which the sample includes. So
 * the difference of two samples is the server's CPU between them whichever backends came and went.
 */
final class ServerCpu {

    private static final Path PROC = Paths.get("/proc");

    private final long postmasterPid;
    private final long probePid;
    private final long nanosPerTick;

    private ServerCpu(long postmasterPid, long probePid, long nanosPerTick) {
        this.postmasterPid = postmasterPid;
        this.probePid = probePid;
        this.nanosPerTick = nanosPerTick;
    }

    /**
     * The server behind the harness's connection if it runs on this machine, else null (with the
     * reason on standard error). Local means: the probe backend's pid is a process here whose
     * parent's working directory is the server's {@code data_directory} (the postmaster changes
     * into it), so a remote server whose pid happens to exist here is not mistaken for ours.
     */
    static @Nullable ServerCpu find(Target target) {
        try {
            long probe = target.queryLong("SELECT pg_backend_pid()");
            Path probeStat = PROC.resolve(Long.toString(probe)).resolve("stat");
            if (!Files.isReadable(probeStat)) {
                Shootout.log("pg_cpu: n/a: backend pid %d is not a process on this machine (a remote server)", probe);
                return null;
            }
            long postmaster = Long.parseLong(fields(Files.readString(probeStat))[1]);
            String dataDirectory = target.queryStrings("SHOW data_directory").get(0);
            Path cwd = PROC.resolve(Long.toString(postmaster)).resolve("cwd").toRealPath();
            if (!cwd.equals(Paths.get(dataDirectory).toRealPath())) {
                Shootout.log("pg_cpu: n/a: pid %d's parent does not run in %s (not this server)", probe, dataDirectory);
                return null;
            }
            ServerCpu cpu = new ServerCpu(postmaster, probe, TimeUnit.SECONDS.toNanos(1) / clockTicksPerSecond());
            Shootout.log("pg_cpu: postmaster pid %d, %d processes now, %d ns per clock tick", postmaster,
                    cpu.processes(), cpu.nanosPerTick);
            return cpu;
        } catch (IOException | RuntimeException e) {
            Shootout.log("pg_cpu: n/a: %s", e.getMessage());
            return null;
        }
    }

    /** CPU nanoseconds (user and system) used by the server so far, less the probe backend's. */
    long sampleNanos() {
        long ticks = ticks(postmasterPid, true) - ticks(probePid, false);
        for (long child : children()) {
            ticks += ticks(child, true);
        }
        return ticks * nanosPerTick;
    }

    private int processes() {
        return 1 + children().size();
    }

    /** The postmaster's live children: every process in /proc whose parent it is. */
    private List<Long> children() {
        List<Long> found = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(PROC, entry -> isPid(entry.getFileName().toString()))) {
            for (Path entry : entries) {
                try {
                    String[] fields = fields(Files.readString(entry.resolve("stat")));
                    if (Long.parseLong(fields[1]) == postmasterPid) {
                        found.add(Long.parseLong(entry.getFileName().toString()));
                    }
                } catch (IOException | RuntimeException gone) {
                    // The process ended between the listing and the read: its time is in the postmaster's.
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException("cannot list /proc", e);
        }
        return found;
    }

    /** utime + stime, plus cutime + cstime (its reaped children) when {@code reaped}; 0 if gone. */
    private static long ticks(long pid, boolean reaped) {
        try {
            String[] f = fields(Files.readString(PROC.resolve(Long.toString(pid)).resolve("stat")));
            // After ownTicks's utime(11) and stime(12): cutime(13) cstime(14).
            return reaped ? ownTicks(f) + Long.parseLong(f[13]) + Long.parseLong(f[14]) : ownTicks(f);
        } catch (IOException | RuntimeException gone) {
            return 0;
        }
    }

    /** A process's or thread's own CPU time in clock ticks, from its stat line: utime plus stime. */
    static long cpuTicks(String stat) {
        return ownTicks(fields(stat));
    }

    private static long ownTicks(String[] f) {
        // After the command name: state(0) ppid(1) ... utime(11) stime(12).
        return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }

    /** The fields of /proc/PID/stat after the command name, which is in parentheses and may hold spaces. */
    static String[] fields(String stat) {
        return stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
    }

    private static boolean isPid(String name) {
        for (int i = 0; i < name.length(); i++) {
            if (!Character.isDigit(name.charAt(i))) {
                return false;
            }
        }
        return !name.isEmpty();
    }

    /** USER_HZ from {@code getconf CLK_TCK}; 100, the value on every Linux we know, if that fails. */
    static long clockTicksPerSecond() {
        try {
            Process process = new ProcessBuilder("getconf", "CLK_TCK").redirectErrorStream(true).start();
            String out = new String(process.getInputStream().readAllBytes()).trim();
            if (process.waitFor(10, TimeUnit.SECONDS) && process.exitValue() == 0) {
                return Long.parseLong(out);
            }
        } catch (IOException | RuntimeException e) {
            // Fall through to the usual value.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 100;
    }
}
