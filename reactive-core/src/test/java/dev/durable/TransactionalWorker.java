package dev.durable;

import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A worker JVM of {@link TransactionalCrashIT}: runs the 'debit' queue, whose transactional job
 * writes its effect in its transaction, records (on a connection of its own, committed) that the
 * write was made, and then halts this JVM before the transaction commits, as an OOM or a
 * {@code kill -9} would. Arguments: the R2DBC URL, the schema, the label of this incarnation.
 */
public final class TransactionalWorker {

    static final String QUEUE = "debit";
    static final String TYPE = "debit";
    static final Duration LEASE = Duration.ofSeconds(2);

    private TransactionalWorker() {
    }

    /** The job; {@code beforeCommit} runs after the write, inside the run (the halt, in the worker). */
    static JobDefinition<String, String> debit(String schema, Mono<Void> beforeCommit) {
        return JobDefinition.transactional(TYPE, String.class,
                        (String account, JobContext context, Connection transaction) ->
                                TransactionalIT.effect(transaction, schema, context.id(), context.attempt(), account)
                                        .then(beforeCommit)
                                        .thenReturn("debited " + account))
                .queue(QUEUE).backoff(Backoff.fixed(Duration.ofMillis(200)));
    }

    public static void main(String[] args) throws InterruptedException {
        String url = args[0];
        String schema = args[1];
        String label = args[2];
        ConnectionPool recorder = PoisonWorker.pool(url, "debit-recorder", 1);
        ConnectionPool enginePool = PoisonWorker.pool(url, "debit-worker", 8);
        Mono<Void> halt = Mono.fromRunnable(() -> {
            Flux.usingWhen(recorder.create(), (Connection c) -> Flux.from(c.createStatement("INSERT INTO \"" + schema
                                    + "\".crash_marks (label) VALUES ($1)").bind(0, label).execute())
                            .flatMap(Result::getRowsUpdated), Connection::close)
                    .blockLast(Duration.ofSeconds(30));
            System.out.println("HALT " + label + " after the write, before the commit");
            System.out.flush();
            Runtime.getRuntime().halt(3);
        });
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().connectionFactory(enginePool)
                        .schema(schema).name("debit").applyMigrations(false)
                        .leaseTtl(LEASE).heartbeatInterval(Duration.ofMillis(500)).reaperInterval(Duration.ofMillis(250))
                        .queue(QueueOptions.builder(QUEUE).concurrency(1).prefetch(0).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(500)).build())
                        .build())
                .register(debit(schema, halt.subscribeOn(reactor.core.scheduler.Schedulers.boundedElastic()).then()))
                .build();
        engine.start().block(Duration.ofSeconds(60));
        System.out.println("READY " + label);
        System.out.flush();
        Thread.currentThread().join(); // until it runs the job, or the test kills it
    }
}
