package dev.durable.benchmarks.sql;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One heartbeat tick ({@code LeaseSql.heartbeat}, one statement) against the number of rows
 * a worker holds (running + buffered): always one round trip, its cost growing with the rows it
 * renews. The table is vacuumed before each beat (not measured).
 */
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class HeartbeatBenchmark {

    @Param({"10", "100", "1000", "10000"})
    public int depth;

    private BenchDatabase db;
    private List<Long> ids;

    @Setup(Level.Trial)
    public void setUp() {
        db = new BenchDatabase("heartbeat_" + depth);
        db.fill(depth, true);
        ids = db.ids();
    }

    /**
     * Each beat leaves a dead version of every row it renews; the engine beats every 5 s and
     * autovacuum keeps up, so the benchmark vacuums before each beat (not measured) rather than
     * measure a table that bloats by thousands of beats per second.
     */
    @Setup(Level.Invocation)
    public void vacuum() {
        db.execute("VACUUM " + db.instances());
    }

    @Benchmark
    public Long heartbeat() {
        return db.statements.leases().heartbeat(ids, BenchDatabase.WORKER, BenchDatabase.LEASE_MILLIS).count().block();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        db.close();
    }
}
