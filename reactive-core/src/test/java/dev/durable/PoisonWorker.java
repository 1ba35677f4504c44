package dev.durable;

import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Option;
import io.r2dbc.spi.Result;
import java.time.Duration;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A worker JVM of {@link PoisonJobIT}: runs the poison queue, whose one job records its run (its
 * claim as the database holds it) and then halts this JVM, as an OOM or a segfault would. The test
 * restarts workers that die. Arguments: the R2DBC URL, the schema, the label of this incarnation.
 */
public final class PoisonWorker {

    static final String QUEUE = "poison";
    static final String TYPE = "poison";
    static final Duration LEASE = Duration.ofSeconds(2);
    static final Backoff BACKOFF = Backoff.exponential(Duration.ofMillis(500), Duration.ofSeconds(10));

    private PoisonWorker() {
    }

    /** The poison job; in the test's own JVM it is only registered, never run. */
    static JobDefinition<String, String> poison(JobHandlerFactory handler) {
        return JobDefinition.of(TYPE, String.class, handler.handler()).queue(QUEUE).backoff(BACKOFF);
    }

    interface JobHandlerFactory {
        dev.durable.JobHandler<String, String> handler();
    }

    public static void main(String[] args) throws InterruptedException {
        String url = args[0];
        String schema = args[1];
        String label = args[2];
        ConnectionPool recorder = pool(url, "poison-recorder", 2);
        ConnectionPool enginePool = pool(url, "poison-worker", 6);
        JobDefinition<String, String> poison = poison(() -> (String ignored, JobContext context) -> Mono.fromCallable(() -> {
            // The run as the database sees it, committed before the JVM goes.
            execute(recorder, "INSERT INTO \"" + schema + "\".poison_runs (instance_id, attempt, claimed_by,"
                    + " eligible_at, label) SELECT id, attempt, claimed_by, eligible_at, $2"
                    + " FROM \"" + schema + "\".durable_instances WHERE id = $1", context.id(), label);
            System.out.println("HALT " + label + " on attempt " + context.attempt());
            System.out.flush();
            Runtime.getRuntime().halt(3);
            return "unreachable";
        }));
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().connectionFactory(enginePool)
                        .schema(schema).name("poison").applyMigrations(false)
                        .leaseTtl(LEASE).heartbeatInterval(Duration.ofMillis(500)).reaperInterval(Duration.ofMillis(250))
                        .queue(QueueOptions.builder(QUEUE).concurrency(1).prefetch(0).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(500)).build())
                        .build())
                .register(poison)
                .build();
        engine.start().block(Duration.ofSeconds(60));
        System.out.println("READY " + label);
        System.out.flush();
        Thread.currentThread().join(); // until it runs the poison job, or the test kills it
    }

    /** A small pool of a worker JVM, named for the server's view ({@code application_name}). */
    static ConnectionPool pool(String url, String applicationName, int maxSize) {
        ConnectionFactoryOptions options = ConnectionFactoryOptions.parse(url).mutate()
                .option(Option.valueOf("applicationName"), applicationName)
                .option(ConnectionFactoryOptions.CONNECT_TIMEOUT, Duration.ofSeconds(5))
                .build();
        return new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(options))
                .initialSize(0).maxSize(maxSize).maxAcquireTime(Duration.ofSeconds(10)).build());
    }

    private static void execute(ConnectionPool pool, String sql, Object... args) {
        Flux.usingWhen(pool.create(), (Connection c) -> {
                    var statement = c.createStatement(sql);
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated);
                }, Connection::close)
                .blockLast(Duration.ofSeconds(30));
    }
}
