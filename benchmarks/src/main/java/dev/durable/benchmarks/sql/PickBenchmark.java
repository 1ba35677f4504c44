package dev.durable.benchmarks.sql;

import io.r2dbc.spi.Connection;
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
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The pick statement ({@code PickSql.pick}) against a backlog of runnable rows: its cost should not
 * grow with the backlog (target: 1M within 2x of 10k). Each pick runs in a transaction that is
 * rolled back, so the backlog stays the same size through the run; a VACUUM between iterations
 * clears the dead row versions the rolled-back claims leave.
 */
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class PickBenchmark {

    @Param({"10000", "1000000"})
    public int backlog;

    @Param({"100"})
    public int limit;

    private BenchDatabase db;
    private Connection connection;

    @Setup(Level.Trial)
    public void setUp() {
        db = new BenchDatabase("pick_" + backlog);
        db.fill(backlog, false);
        connection = db.admin();
    }

    @Setup(Level.Iteration)
    public void vacuum() {
        db.execute("VACUUM ANALYZE " + db.instances());
    }

    @Benchmark
    public Long pick() {
        return Mono.from(connection.beginTransaction())
                .thenMany(db.statements.picks().pick(connection, BenchDatabase.QUEUE, limit, BenchDatabase.WORKER,
                        BenchDatabase.LEASE_MILLIS))
                .count()
                .flatMap(n -> Mono.from(connection.rollbackTransaction()).thenReturn(n))
                .block();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        db.close();
    }
}
