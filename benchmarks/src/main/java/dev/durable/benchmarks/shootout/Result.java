package dev.durable.benchmarks.shootout;

import java.util.Locale;

/** One system's figures, printed as the RESULT line. */
record Result(String name, int jobs, double seconds, double p50Millis, double p99Millis) {

    double jobsPerSecond() {
        return jobs / seconds;
    }

    String line() {
        return String.format(Locale.ROOT, "RESULT name=%s jobs=%d seconds=%.3f jobs_per_s=%.1f p50_ms=%.2f p99_ms=%.2f",
                name, jobs, seconds, jobsPerSecond(), p50Millis, p99Millis);
    }
}
