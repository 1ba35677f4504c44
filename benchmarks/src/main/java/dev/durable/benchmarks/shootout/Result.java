package dev.durable.benchmarks.shootout;

import java.util.List;
import java.util.Locale;

/**
 * One system's figures in one round (or their medians over the rounds, with round "median"),
 * printed as a RESULT line of space-separated key=value pairs.
 */
record Result(String name, String round, int jobs, double seconds, double jobsPerSecond, double p50Millis,
        double p99Millis, Costs costs) {

    static Result of(String name, int round, int jobs, double seconds, double p50Millis, double p99Millis,
            Costs costs) {
        return new Result(name, Integer.toString(round), jobs, seconds, jobs / seconds, p50Millis, p99Millis, costs);
    }

    /** Each column's median over the rounds, taken column by column. */
    static Result median(List<Result> rounds) {
        Result first = rounds.get(0);
        return new Result(first.name(), "median", first.jobs(), Costs.median(rounds, Result::seconds),
                Costs.median(rounds, Result::jobsPerSecond), Costs.median(rounds, Result::p50Millis),
                Costs.median(rounds, Result::p99Millis), Costs.median(rounds.stream().map(Result::costs).toList()));
    }

    String line() {
        return String.format(Locale.ROOT,
                "RESULT name=%s round=%s jobs=%d seconds=%.3f jobs_per_s=%.1f p50_ms=%.2f p99_ms=%.2f %s",
                name, round, jobs, seconds, jobsPerSecond, p50Millis, p99Millis, costs.columns());
    }
}
