package dev.durable.support;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Instance;
import dev.durable.Maintenance;
import dev.durable.InstanceStatus;
import dev.durable.Definition;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Builds engines on the test's database with short test timings, and closes every engine it built
 * after each test. Register with {@code @RegisterExtension}.
 */
public final class Engines implements AfterEachCallback {

    private final List<DurableEngine> engines = new ArrayList<>();
    private TestDatabase db;

    public Engines on(TestDatabase database) {
        this.db = database;
        return this;
    }

    /** Test timings: 3 s leases beaten every 500 ms, the reaper and the await expiry every 500 ms. */
    public EngineOptions.Builder options(String name) {
        return db.engineOptions().name(name)
                .leaseTtl(Duration.ofSeconds(3))
                .heartbeatInterval(Duration.ofMillis(500))
                .reaperInterval(Duration.ofMillis(500))
                .awaitExpiry(Maintenance.TaskOptions.every(Duration.ofMillis(500)));
    }

    public DurableEngine start(EngineOptions.Builder options, Definition... definitions) {
        DurableEngine engine = build(options, definitions);
        engine.start().block(Duration.ofSeconds(60));
        return engine;
    }

    public DurableEngine build(EngineOptions.Builder options, Definition... definitions) {
        DurableEngine.Builder builder = DurableEngine.builder(options.build());
        for (Definition definition : definitions) {
            builder.register(definition);
        }
        DurableEngine engine = builder.build();
        synchronized (engines) {
            engines.add(engine);
        }
        return engine;
    }

    /** Closes this engine after the test too. */
    public DurableEngine track(DurableEngine engine) {
        synchronized (engines) {
            engines.add(engine);
        }
        return engine;
    }

    public Instance awaitStatus(DurableEngine engine, long id, InstanceStatus status, Duration timeout) {
        return Eventually.until("instance " + id + " " + status, timeout,
                () -> engine.get(id).block(Duration.ofSeconds(10)), i -> i.status() == status);
    }

    public Instance awaitSettled(DurableEngine engine, long id, Duration timeout) {
        return Eventually.until("instance " + id + " settled", timeout,
                () -> engine.get(id).block(Duration.ofSeconds(10)), i -> i.status().isTerminal());
    }

    @Override
    public void afterEach(ExtensionContext context) {
        List<DurableEngine> toClose;
        synchronized (engines) {
            toClose = new ArrayList<>(engines);
            engines.clear();
        }
        for (DurableEngine engine : toClose) {
            engine.closeLater().block(Duration.ofSeconds(60));
        }
    }

    public static UnaryOperator<EngineOptions.Builder> none() {
        return b -> b;
    }
}
