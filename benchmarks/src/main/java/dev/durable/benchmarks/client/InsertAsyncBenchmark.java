package dev.durable.benchmarks.client;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.time.Duration;
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
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;
import reactor.core.publisher.Mono;

/**
 * One insert per call from 64 concurrent callers (issue 17 #7): {@code insert} (a round trip per
 * call, on the engine's pool of 10) against {@code insertAsync} (the insert buffer: one round trip
 * per flush, with the default batch size and delay). Throughput mode gives inserts/s; sample mode
 * gives the latency percentiles (p99) of one call. The engine runs no queue, so nothing but the
 * inserts touches the table, which is emptied between iterations.
 */
@State(Scope.Benchmark)
@Fork(1)
@Threads(64)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@BenchmarkMode({Mode.Throughput, Mode.SampleTime})
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class InsertAsyncBenchmark {

    private static final Duration WAIT = Duration.ofMinutes(1);

    @Param({"insert", "insertAsync"})
    public String api;

    private TestDatabase database;
    private DurableEngine engine;
    private JobRequest request;

    @Setup(Level.Trial)
    public void setUp() {
        database = TestPostgres.newDatabase("insert_async_" + api);
        engine = DurableEngine.builder(EngineOptions.builder().url(database.url()).schema(database.schema())
                        .name("bench").poolMaxSize(10).build())
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty()).queue("bench"))
                .build();
        engine.migrate().block(WAIT);
        request = JobRequest.of("noop", 42L);
    }

    @Setup(Level.Iteration)
    public void empty() {
        database.execute("TRUNCATE \"" + database.schema() + "\".durable_instances, \"" + database.schema()
                + "\".durable_history");
    }

    @Benchmark
    public Long insertOne() {
        return (api.equals("insertAsync") ? engine.insertAsync(request) : engine.insert(request)).block(WAIT);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        engine.closeLater().block(WAIT);
        database.close();
    }
}
