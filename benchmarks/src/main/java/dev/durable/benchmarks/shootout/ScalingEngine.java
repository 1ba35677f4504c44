package dev.durable.benchmarks.shootout;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.QueueOptions;
import java.io.IOException;
import java.time.Duration;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * One engine of a {@link Scaling} run, in a JVM of its own: the shootout's tuned Durable
 * ({@link DurableContender}'s queue and commit knobs) with a pool of the size it is given, running
 * the no-op job. Prints {@code READY} once started, runs until its standard input closes, then
 * closes the engine and prints its picks.
 *
 * <pre>
 * java -cp benchmarks.jar dev.durable.benchmarks.shootout.ScalingEngine R2DBC_URL SCHEMA POOL_SIZE
 * </pre>
 */
public final class ScalingEngine {

    private ScalingEngine() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 3) {
            throw new IllegalArgumentException("usage: ScalingEngine R2DBC_URL SCHEMA POOL_SIZE");
        }
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder()
                        .url(args[0])
                        .schema(args[1])
                        .poolMaxSize(Integer.parseInt(args[2]))
                        .handlerScheduler(Schedulers.parallel())
                        .commitBatchSize(DurableContender.COMMIT_BATCH)
                        .commitParallelism(DurableContender.COMMIT_PARALLELISM)
                        .queue(QueueOptions.builder(DurableContender.QUEUE).concurrency(DurableContender.CONCURRENCY)
                                .prefetch(DurableContender.PREFETCH).minDemand(DurableContender.MIN_DEMAND).build())
                        .build())
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty())
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
