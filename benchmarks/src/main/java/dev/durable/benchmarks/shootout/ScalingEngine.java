package dev.durable.benchmarks.shootout;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.QueueOptions;
import java.io.IOException;
import java.time.Duration;
import reactor.core.scheduler.Schedulers;

/**
 * One engine of a {@link Scaling} run, in a JVM of its own: the shootout's tuned Durable
 * ({@link DurableContender}'s queue and commit knobs) with a pool of the size it is given, running
 * the no-op job. Prints {@code READY} once started, runs until its standard input closes, then
 * closes the engine and prints its picks.
 *
 * <pre>
 * SCALING_R2DBC_URL=r2dbc:postgresql://... \
 *     java -cp benchmarks.jar dev.durable.benchmarks.shootout.ScalingEngine SCHEMA POOL_SIZE
 * </pre>
 */
public final class ScalingEngine {

    /** The environment variable that carries the database URL (it may hold a password). */
    static final String URL_ENV = "SCALING_R2DBC_URL";

    private ScalingEngine() {
    }

    public static void main(String[] args) throws IOException {
        String url = System.getenv(URL_ENV);
        if (args.length != 2 || url == null) {
            throw new IllegalArgumentException("usage: " + URL_ENV + "=R2DBC_URL ScalingEngine SCHEMA POOL_SIZE");
        }
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder()
                        .url(url)
                        .schema(args[0])
                        .poolMaxSize(Integer.parseInt(args[1]))
                        .handlerScheduler(Schedulers.parallel())
                        .commitBatchSize(DurableContender.COMMIT_BATCH)
                        .commitParallelism(DurableContender.COMMIT_PARALLELISM)
                        .queue(QueueOptions.builder(DurableContender.QUEUE).concurrency(DurableContender.CONCURRENCY)
                                .prefetch(DurableContender.PREFETCH).minDemand(DurableContender.MIN_DEMAND).build())
                        .build())
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> DurableContender.handlerWork())
                        .queue(DurableContender.QUEUE))
                .build();
        engine.start().block(Duration.ofMinutes(2));
        System.out.println("READY");
        System.out.flush();
        while (System.in.read() >= 0) {
            // The parent closes our standard input to stop us.
        }
        engine.queueStats().forEach(stats -> System.out.println("STATS picks=" + stats.picks() + " picked="
                + stats.picked() + " pick_retries=" + stats.pickRetries() + " pick_failures=" + stats.pickFailures()));
        engine.closeLater().block(Duration.ofMinutes(1));
        System.out.flush();
        System.exit(0);
    }
}
