package dev.durable.benchmarks.chaos;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * What a chaos run found: the workload's size, the duplicate executions and their rate, the faults
 * by kind, and each invariant's count (all zero on a correct engine). {@code workDirectory} is
 * where the run's files were; {@code kept} says whether they were left for a look (a failed run).
 */
public record Report(long jobs, long terminal, long executions, long duplicates, Map<String, Long> faults,
        Map<String, Long> invariants, String details, Path workDirectory, boolean kept) {

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

    public String line() {
        return "CHAOS jobs=" + jobs + " terminal=" + terminal + " executions=" + executions + " duplicates="
                + duplicates + " dup_rate=" + String.format(Locale.ROOT, "%.2f%%", 100 * duplicateRate())
                + " faults=" + faultCount() + " "
                + invariants.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                        .collect(Collectors.joining(" "));
    }
}
