package dev.durable.benchmarks.shootout;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.ToDoubleFunction;

/**
 * What one measured window cost per job, beside the wall clock: PostgreSQL's CPU, the harness
 * JVM's CPU, the part of it the JIT compilers took, WAL bytes, b-tree index entries written and
 * statements executed. {@code NaN} stands for a figure that could not be measured (printed as
 * {@code n/a}); see {@link CostMeter}. The JIT's share is apart because it is the noisiest part of
 * the JVM's figure: 2 to 5 s of a sustained window 15 s after the start (2 to 6 us a job), from
 * run to run of the same code, where the rest moved by about 1 us.
 */
record Costs(double pgCpuMicros, double jvmCpuMicros, double jitMicros, double walBytes, double indexWrites,
        double statements) {

    static final Costs NONE = new Costs(Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN);

    /** The columns of the RESULT line, in order. */
    String columns() {
        return "pg_cpu_us_per_job=" + format(pgCpuMicros, "%.1f")
                + " jvm_cpu_us_per_job=" + format(jvmCpuMicros, "%.1f")
                + " jit_us_per_job=" + format(jitMicros, "%.1f")
                + " wal_bytes_per_job=" + format(walBytes, "%.0f")
                + " index_writes_per_job=" + format(indexWrites, "%.2f")
                + " statements_per_job=" + format(statements, "%.3f");
    }

    /** Each column's median over rounds, on its own (not the costs of one median round). */
    static Costs median(List<Costs> rounds) {
        return new Costs(median(rounds, Costs::pgCpuMicros), median(rounds, Costs::jvmCpuMicros),
                median(rounds, Costs::jitMicros), median(rounds, Costs::walBytes), median(rounds, Costs::indexWrites),
                median(rounds, Costs::statements));
    }

    static <T> double median(List<T> items, ToDoubleFunction<T> column) {
        return median(items.stream().mapToDouble(column).filter(v -> !Double.isNaN(v)).toArray());
    }

    /** The middle value, or the mean of the two middle ones; NaN if there are none. */
    static double median(double[] unsorted) {
        int n = unsorted.length;
        if (n == 0) {
            return Double.NaN;
        }
        double[] values = Arrays.copyOf(unsorted, n);
        Arrays.sort(values);
        return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    }

    static String format(double value, String pattern) {
        return Double.isNaN(value) ? "n/a" : String.format(Locale.ROOT, pattern, value);
    }
}
