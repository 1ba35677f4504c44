package dev.durable.benchmarks.sql;

import dev.durable.JobRequest;
import java.util.ArrayList;
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
 * Batch insert through the public API ({@code DurableEngine.insertAll}, one round trip per batch):
 * time per batch; rows per second is {@code batch / time}. The table is emptied between
 * iterations so it does not grow through the run.
 */
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class InsertBenchmark {

    @Param({"1", "100", "1000"})
    public int batch;

    private BenchDatabase db;
    private List<JobRequest> requests;

    @Setup(Level.Trial)
    public void setUp() {
        db = new BenchDatabase("insert_" + batch);
        requests = new ArrayList<>(batch);
        for (int i = 0; i < batch; i++) {
            requests.add(JobRequest.of("noop", (long) i));
        }
    }

    @Setup(Level.Iteration)
    public void empty() {
        db.execute("TRUNCATE " + db.instances() + ", " + db.history());
    }

    @Benchmark
    public List<Long> insertAll() {
        return db.engine.insertAll(requests).block();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        db.close();
    }
}
