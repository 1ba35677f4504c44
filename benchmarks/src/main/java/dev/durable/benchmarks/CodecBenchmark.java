package dev.durable.benchmarks;

import dev.durable.JacksonJsonCodec;
import dev.durable.JsonCodec;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/** The default codec on job arguments of a few sizes: every insert encodes, every run decodes. */
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class CodecBenchmark {

    public record Line(String sku, int quantity, long cents) {
    }

    public record Order(long id, String customer, List<Line> lines) {
    }

    @Param({"1", "20"})
    public int lines;

    private final JsonCodec codec = new JacksonJsonCodec();
    private Order order;
    private String json;

    @Setup
    public void setUp() {
        List<Line> items = new java.util.ArrayList<>();
        for (int i = 0; i < lines; i++) {
            items.add(new Line("sku-" + i, i + 1, 100L * i));
        }
        order = new Order(42, "ada@example.com", items);
        json = codec.encode(order);
    }

    @Benchmark
    public String encode() {
        return codec.encode(order);
    }

    @Benchmark
    public Order decode() {
        return codec.decode(json, Order.class);
    }
}
