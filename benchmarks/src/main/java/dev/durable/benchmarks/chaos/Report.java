package dev.durable.benchmarks.chaos;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToLongFunction;
import java.util.stream.Collectors;

/**
 * What a chaos run found: the workload's size, the duplicate executions and their rate, the faults
 * by kind, each invariant's count (all zero on a correct engine), what each release of the workload
 * ran (with {@code --skew}: executions by the first and by the second, of the second's new step, and
 * flows that ran under both versions, migrated while they ran), the transactional jobs (done, failed,
 * executions whose effect rolled back, and of those the ones whose handler had succeeded), and the
 * samples taken once a minute
 * while it loaded. {@code workDirectory} is where the run's files were; {@code kept} says
 * whether they were left for a look (a failed run).
 */
public record Report(long jobs, long terminal, long executions, long duplicates, Map<String, Long> faults,
        Map<String, Long> invariants, Map<String, Long> releases, Map<String, Long> transactional,
        List<Minute> minutes, String details,
        Path workDirectory, boolean kept) {

    /**
     * One minute's sample: the harness JVM's heap used right after a full collection (it hosts the
     * in-process engines), its live threads, the server's connections of the engines and of the
     * harness, and the backlog (rows not settled).
     */
    public record Minute(int minute, long heapMb, int threads, long engineConnections, long harnessConnections,
            long backlog) {

        @Override
        public String toString() {
            return minute + "m heap " + heapMb + " MB, " + threads + " threads, connections " + engineConnections
                    + " engine + " + harnessConnections + " harness, backlog " + backlog;
        }
    }

    public double duplicateRate() {
        return executions == 0 ? 0 : (double) duplicates / executions;
    }

    public long faultCount() {
        return faults.values().stream().mapToLong(Long::longValue).sum();
    }

    public long invariant(String name) {
        return invariants.getOrDefault(name, 0L);
    }

    /** The invariants that broke. */
    public List<String> broken() {
        return invariants.entrySet().stream().filter(e -> e.getValue() != 0).map(Map.Entry::getKey).toList();
    }

    public boolean ok() {
        return broken().isEmpty();
    }

    /**
     * The minutes sampled past warm-up (the first quarter of the run, at least two minutes): the
     * first and last heap, its least-squares slope in MB a minute, and the ranges of threads,
     * connections and backlog. Flat means a slope near zero, not a rising line.
     */
    public String soakLine() {
        int warmUp = Math.min(minutes.size() - 1, Math.max(2, minutes.size() / 4));
        List<Minute> steady = minutes.subList(Math.max(0, warmUp), minutes.size());
        return "SOAK minutes=" + minutes.size() + " steady_from=" + steady.get(0).minute() + "m"
                + " heap_mb=" + steady.get(0).heapMb() + ".." + steady.get(steady.size() - 1).heapMb()
                + " heap_max_mb=" + steady.stream().mapToLong(Minute::heapMb).max().orElse(0)
                + " heap_slope_mb_per_min=" + String.format(Locale.ROOT, "%.2f", slope(steady, Minute::heapMb))
                + " threads=" + range(steady, m -> m.threads())
                + " threads_slope_per_min=" + String.format(Locale.ROOT, "%.2f", slope(steady, Minute::threads))
                + " engine_connections=" + range(steady, Minute::engineConnections)
                + " harness_connections=" + range(steady, Minute::harnessConnections)
                + " backlog=" + range(steady, Minute::backlog);
    }

    private static String range(List<Minute> samples, ToLongFunction<Minute> value) {
        return samples.stream().mapToLong(value).min().orElse(0) + ".." + samples.stream().mapToLong(value).max().orElse(0);
    }

    private static double slope(List<Minute> samples, ToLongFunction<Minute> value) {
        int n = samples.size();
        if (n < 2) {
            return 0;
        }
        double meanX = samples.stream().mapToDouble(Minute::minute).average().orElse(0);
        double meanY = samples.stream().mapToDouble(m -> value.applyAsLong(m)).average().orElse(0);
        double covariance = 0;
        double variance = 0;
        for (Minute m : samples) {
            covariance += (m.minute() - meanX) * (value.applyAsLong(m) - meanY);
            variance += (m.minute() - meanX) * (m.minute() - meanX);
        }
        return variance == 0 ? 0 : covariance / variance;
    }

    public String line() {
        return "CHAOS jobs=" + jobs + " terminal=" + terminal + " executions=" + executions + " duplicates="
                + duplicates + " dup_rate=" + String.format(Locale.ROOT, "%.2f%%", 100 * duplicateRate())
                + " faults=" + faultCount() + " "
                + invariants.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                        .collect(Collectors.joining(" "));
    }
}
