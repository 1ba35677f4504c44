package dev.durable.benchmarks.shootout;

import java.util.List;
import java.util.Locale;

/**
 * One system's figures in one round (or their medians over the rounds, with round "median"),
 * printed as a RESULT line of space-separated key=value pairs. {@code mode} is short (a fixed job
 * count, its idle latency beside it) or sustained (the steady-state window of a saturated run, no
 * idle latency: n/a); {@code profile} is the server's commit profile ({@link Target.Profile}).
 */
record Result(String name, String mode, String profile, String round, long jobs, double seconds,
        double jobsPerSecond, double p50Millis, double p99Millis, Costs costs) {

    static Result of(String name, String mode, String profile, int round, long jobs, double seconds,
            double p50Millis, double p99Millis, Costs costs) {
        return new Result(name, mode, profile, Integer.toString(round), jobs, seconds, jobs / seconds, p50Millis,
                p99Millis, costs);
    }

    /** Each column's median over the rounds, taken column by column. */
    static Result median(List<Result> rounds) {
        Result first = rounds.get(0);
        return new Result(first.name(), first.mode(), first.profile(), "median", first.jobs(),
                Costs.median(rounds, Result::seconds), Costs.median(rounds, Result::jobsPerSecond),
                Costs.median(rounds, Result::p50Millis), Costs.median(rounds, Result::p99Millis),
                Costs.median(rounds.stream().map(Result::costs).toList()));
    }

    String line() {
        return String.format(Locale.ROOT, "RESULT name=%s mode=%s profile=%s round=%s jobs=%d seconds=%.3f"
                        + " jobs_per_s=%.1f p50_ms=%s p99_ms=%s %s", name, mode, profile, round, jobs, seconds,
                jobsPerSecond, Costs.format(p50Millis, "%.2f"), Costs.format(p99Millis, "%.2f"), costs.columns());
    }
}
