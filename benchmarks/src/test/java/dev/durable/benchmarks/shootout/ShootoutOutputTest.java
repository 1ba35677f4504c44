package dev.durable.benchmarks.shootout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The shootout's arguments, medians and output lines; no database. */
class ShootoutOutputTest {

    @Test
    void aWarmUpPassIsAsLongAsTheWindowUnlessToldOtherwise() {
        Shootout.Config defaults = Shootout.parse(new String[0]);
        assertEquals(Shootout.DEFAULT_JOBS, defaults.warmupJobs());
        assertEquals(Shootout.DEFAULT_ROUNDS, defaults.rounds());

        Shootout.Config config = Shootout.parse(new String[] {"--jobs", "5000", "--rounds", "2"});
        assertEquals(5000, config.warmupJobs());
        assertEquals(2, config.rounds());
        assertEquals(700, Shootout.parse(new String[] {"--jobs", "5000", "--warmup-jobs", "700"}).warmupJobs());
    }

    @Test
    void sustainedModeRunsOneRoundOfSixtySecondsWithTheLastFortyFiveMeasured() {
        Shootout.Config config = Shootout.parse(new String[] {"--mode", "sustained", "--profile", "durable"});
        assertTrue(config.sustained());
        assertEquals(Target.Profile.DURABLE, config.profile());
        assertEquals(1, config.rounds());
        assertEquals(60, config.seconds());
        assertEquals(45, config.steadySeconds());
        assertEquals(List.of(0.5, 0.8), config.loadShares());
        assertEquals(List.of(0.25, 1.0),
                Shootout.parse(new String[] {"--mode", "sustained", "--load-shares", "0.25,1"}).loadShares());
        assertThrows(IllegalArgumentException.class,
                () -> Shootout.parse(new String[] {"--mode", "sustained", "--seconds", "30", "--steady-seconds", "30"}));
        assertThrows(IllegalArgumentException.class, () -> Shootout.parse(new String[] {"--load-shares", "0.5,1.2"}));
        assertThrows(IllegalArgumentException.class, () -> Shootout.parse(new String[] {"--profile", "safe"}));
        assertThrows(IllegalArgumentException.class, () -> Shootout.parse(new String[] {"--mode", "long"}));
    }

    @Test
    void theLoadLineGivesPercentilesOfEachLatencyAndNaWhereNothingWasSeen() {
        double[] starts = new double[1000];
        for (int i = 0; i < starts.length; i++) {
            starts[i] = i + 1;
        }
        SustainedProtocol.Load load = new SustainedProtocol.Load("jobrunr", "durable", 0.8, 1200, 1000, starts,
                new double[0], new double[] {1, 2, 3});
        Map<String, String> fields = fields(load.line());
        assertEquals("0.80", fields.get("share"));
        assertEquals("500.00", fields.get("start_p50_ms"));
        assertEquals("990.00", fields.get("start_p99_ms"));
        assertEquals("999.00", fields.get("start_p999_ms"));
        assertEquals("n/a", fields.get("settle_p99_ms"));
        assertEquals("0", fields.get("settled"));
        assertEquals("3.00", fields.get("insert_p99_ms"));
    }

    @Test
    void theResultLineIsKeyValuePairsWithNaAsNotAvailable() {
        Result result = Result.of("durable", "short", "fast", 2, 20_000, 4.0, 3.25, 12.5,
                new Costs(81.24, 150.0, 4.25, 1_234.4, 6.9, Double.NaN));
        Map<String, String> fields = fields(result.line());
        assertEquals(List.of("name", "mode", "profile", "round", "jobs", "seconds", "jobs_per_s", "p50_ms", "p99_ms",
                "pg_cpu_us_per_job", "jvm_cpu_us_per_job", "jit_us_per_job", "wal_bytes_per_job", "index_writes_per_job",
                "statements_per_job"), List.copyOf(fields.keySet()));
        assertEquals("2", fields.get("round"));
        assertEquals("5000.0", fields.get("jobs_per_s"));
        assertEquals("81.2", fields.get("pg_cpu_us_per_job"));
        assertEquals("4.3", fields.get("jit_us_per_job"));
        assertEquals("1234", fields.get("wal_bytes_per_job"));
        assertEquals("n/a", fields.get("statements_per_job"));
    }

    @Test
    void theMedianLineTakesEachColumnOnItsOwnAndSkipsWhatWasNotMeasured() {
        Result a = Result.of("raw_sql", "short", "fast", 1, 100, 1.0, 1, 10, new Costs(10, 1, 0.5, 100, 4, Double.NaN));
        Result b = Result.of("raw_sql", "short", "fast", 2, 100, 2.0, 3, 30, new Costs(30, 3, 1.5, 300, 4, Double.NaN));
        Result c = Result.of("raw_sql", "short", "fast", 3, 100, 4.0, 2, 20, new Costs(Double.NaN, 2, 1.0, 200, 4, Double.NaN));
        Result median = Result.median(List.of(a, b, c));
        assertEquals("median", median.round());
        assertEquals(2.0, median.seconds());
        assertEquals(50.0, median.jobsPerSecond());
        assertEquals(2.0, median.p50Millis());
        assertEquals(20.0, median.costs().pgCpuMicros(), 0.0);
        assertTrue(Double.isNaN(median.costs().statements()));
    }

    @Test
    void theRatioIsTheMedianOfPerRoundRatios() {
        List<Map<String, Result>> rounds = List.of(
                round(1, 1000, 2000), round(2, 1000, 1000), round(3, 3000, 1000), round(4, 1000, 4000));
        // Durable's jobs/s over raw's per round: 2, 1, 1/3, 4; the median of four is the mean of 1 and 2.
        assertEquals(1.5, Shootout.medianRatio(rounds, "raw_sql"), 1e-9);
        assertTrue(Double.isNaN(Shootout.medianRatio(rounds, "jobrunr")));
    }

    @Test
    void procStatFieldsSurviveACommandNameWithSpacesAndParentheses() {
        String stat = "4242 (postgres: walwriter (x) ) S 4200 4200 4200 0 -1 4194624 100 0 0 0 7 3 2 1 20 0 1 0";
        String[] fields = ServerCpu.fields(stat);
        assertEquals("S", fields[0]);
        assertEquals("4200", fields[1]);
        assertEquals("7", fields[11]);
        assertEquals("3", fields[12]);
        assertEquals("2", fields[13]);
        assertEquals("1", fields[14]);
    }

    private static Map<String, Result> round(int round, double durableSeconds, double rawSeconds) {
        Map<String, Result> results = new LinkedHashMap<>();
        results.put("durable", Result.of("durable", "short", "fast", round, 1000, durableSeconds, 1, 1, Costs.NONE));
        results.put("raw_sql", Result.of("raw_sql", "short", "fast", round, 1000, rawSeconds, 1, 1, Costs.NONE));
        return results;
    }

    private static Map<String, String> fields(String line) {
        String[] tokens = line.split(" ");
        assertTrue(tokens[0].equals("RESULT") || tokens[0].equals("LOAD"), tokens[0]);
        Map<String, String> fields = new LinkedHashMap<>();
        for (int i = 1; i < tokens.length; i++) {
            int eq = tokens[i].indexOf('=');
            assertTrue(eq > 0, "not key=value: " + tokens[i]);
            fields.put(tokens[i].substring(0, eq), tokens[i].substring(eq + 1));
        }
        return fields;
    }
}
