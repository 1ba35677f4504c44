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
import reactor.core.publisher.Mono;

/**
 * The pick statement ({@code PickSql.pick}, limit 100) over the backlog shapes of {@link PickShape}:
 * 10 due rows alone ({@code empty}), behind {@code rows} future rows at a more urgent priority
 * ({@code future}), and behind {@code rows} runnable rows of a concurrency key that is executing
 * ({@code blocked}). Target: each within 2x of {@code empty}. Each pick is rolled back.
 */
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class PickShapeBenchmark {

    @Param({"empty", "future", "blocked"})
    public String shape;

    @Param({"1000000"})
    public int rows;

    private BenchDatabase db;
    private Connection connection;

    @Setup(Level.Trial)
    public void setUp() {
        db = new BenchDatabase("pick_shape_" + shape);
        PickShape.fill(db, shape, rows);
        connection = db.admin();
    }

    @Setup(Level.Iteration)
    public void vacuum() {
        db.execute("VACUUM ANALYZE " + db.instances());
    }

    @Benchmark
    public Long pick() {
        return Mono.from(connection.beginTransaction())
                .thenMany(db.statements.picks().pick(connection, BenchDatabase.QUEUE, 100, BenchDatabase.WORKER,
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
