package dev.durable.benchmarks.chaos;

import dev.durable.Definition;
import dev.durable.DurableEngine;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The separate worker JVM of the chaos run: an engine on the chaos schema that runs the shared
 * queues and the solo queue (only it runs that one, so its poison jobs halt it and its own rows
 * come back to it), registers its worker ids, and runs until the harness kills it, stops it, or a
 * poison job halts it. Its engine's connections go through the harness's proxy; its recorder's do
 * not. Arguments: the engine's R2DBC URL, the recorder's, the schema, the label of this
 * incarnation, the Redis URI or "-", the CPU milliseconds each plain job burns, the workload's release.
 */
public final class ChaosWorker {

    private ChaosWorker() {
    }

    public static void main(String[] args) throws InterruptedException {
        String engineUrl = args[0];
        String recorderUrl = args[1];
        String schema = args[2];
        String label = args[3];
        @Nullable String redisUri = args[4].equals("-") ? null : args[4];
        Duration burn = Duration.ofMillis(Long.parseLong(args[5]));
        int generation = Integer.parseInt(args[6]);
        ConnectionPool recorder = Chaos.pool(recorderUrl, Chaos.HARNESS_APP, 4);
        // Named after this incarnation, not only its process id: ids are told apart by it, as process
        // ids come round again (every 32,768 processes on a default Linux) and two incarnations with
        // one id would share each other's claims in the checks.
        String engineName = "chaos-" + label;
        // Before the engine claims anything: a poison job may halt this JVM before it registers its ids.
        Chaos.retry("register this process", () -> Chaos.execute(recorder, "INSERT INTO " + ChaosSchema.q(schema)
                + ".chaos_workers (label, worker) VALUES ($1, $2) ON CONFLICT DO NOTHING", label,
                engineName + ":%"));
        // A new engine per attempt: an engine whose start failed keeps answering with that failure.
        DurableEngine[] started = new DurableEngine[1];
        Chaos.retry("start worker JVM engine", () -> {
            ConnectionPool enginePool = Chaos.pool(engineUrl, Chaos.ENGINE_APP, 12);
            DurableEngine.Builder builder = DurableEngine.builder(Chaos.engineOptions(enginePool, schema, engineName,
                    redisUri, redisUri != null ? Chaos.Pokes.REDIS : Chaos.Pokes.NOTIFY, true).build());
            for (Definition definition : new ChaosWorkload(label, recorder, schema, true, burn, generation).definitions()) {
                builder.register(definition);
            }
            builder.schedule(ChaosWorkload.tick());
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
