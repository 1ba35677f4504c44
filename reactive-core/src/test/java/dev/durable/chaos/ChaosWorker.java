package dev.durable.chaos;

import dev.durable.Definition;
import dev.durable.DurableEngine;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;

/**
 * The separate worker JVM of the chaos run: starts an engine on the chaos schema that runs both
 * chaos queues, registers its worker ids, and runs until the harness kills it with SIGKILL.
 * Arguments: the R2DBC URL, the schema, the label of this incarnation.
 */
public final class ChaosWorker {

    private ChaosWorker() {
    }

    public static void main(String[] args) throws InterruptedException {
        String url = args[0];
        String schema = args[1];
        String label = args[2];
        ConnectionPool recorder = Chaos.pool(url, Chaos.HARNESS_APP, 4);
        // A new engine per attempt: an engine whose start failed keeps answering with that failure.
        DurableEngine[] started = new DurableEngine[1];
        Chaos.retry("start worker JVM engine", () -> {
            ConnectionPool enginePool = Chaos.pool(url, Chaos.ENGINE_APP, 8);
            DurableEngine.Builder builder = DurableEngine.builder(
                    Chaos.engineOptions(enginePool, schema, "chaos-jvm").build());
            for (Definition definition : new ChaosWorkload(label, recorder, schema).definitions()) {
                builder.register(definition);
            }
            DurableEngine engine = builder.build();
            try {
                engine.start().block(Duration.ofSeconds(30));
            } catch (RuntimeException e) {
                enginePool.dispose();
                throw e;
            }
            started[0] = engine;
        });
        DurableEngine engine = started[0];
        Chaos.retry("register workers", () -> Chaos.registerWorkers(recorder, schema, label, engine));
        System.out.println("READY " + label);
        System.out.flush();
        Thread.currentThread().join(); // until killed
    }
}
