package dev.durable.docs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobContext;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.StepHandler;
import dev.durable.WorkflowDefinition;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The exactly-once section of docs/jobs.md: transactional jobs and steps, and completing from your transaction. */
@ExtendWith(PostgresExtension.class)
class ExactlyOnceIT {

    record Credit(String account, long cents) {
    }

    record Order(String sku, int quantity) {
    }

    private DurableEngine engine;
    private ConnectionFactory appConnections;

    /** Runs one statement on a connection and completes when it has. */
    static Mono<Void> run(Connection connection, String sql, Object... args) {
        var statement = connection.createStatement(sql);
        for (int i = 0; i < args.length; i++) {
            statement.bind(i, args[i]);
        }
        return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated).then();
    }

    // tag::caller-complete[]
    /** The handler of 'ship': the shipment and the job's outcome commit in one transaction of the app's. */
    Mono<String> ship(Order order, JobContext context) {
        return Mono.usingWhen(appConnections.create(),
                connection -> Mono.from(connection.beginTransaction())
                        .then(run(connection, "INSERT INTO shipments (sku, quantity) VALUES ($1, $2)",
                                order.sku(), order.quantity()))
                        .then(engine.complete(connection, context.claim(), "shipped"))
                        .then(Mono.from(connection.commitTransaction())),
                Connection::close,
                (connection, error) -> Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())),
                connection -> Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())))
                .thenReturn("shipped"); // dropped as stale: the transaction above settled the run
    }
    // end::caller-complete[]

    @Test
    void transactionalJobsStepsAndCallersWriteExactlyOnce(TestDatabase db) {
        // The app's own tables, where its statements find them (public: on every connection's search path).
        for (String table : new String[] {"ledger (account text, cents bigint, job_id bigint UNIQUE)",
                "stock (sku text PRIMARY KEY, reserved int)", "shipments (sku text, quantity int)"}) {
            db.execute("DROP TABLE IF EXISTS public." + table.substring(0, table.indexOf(' ')));
            db.execute("CREATE TABLE public." + table);
        }
        db.execute("INSERT INTO public.stock VALUES ('tea', 0)");
        appConnections = db.connectionFactory();

        // tag::transactional-job[]
        JobDefinition<Credit, Void> credit = JobDefinition.transactional("credit", Credit.class,
                (Credit c, JobContext context, Connection transaction) -> run(transaction,
                        "INSERT INTO ledger (account, cents, job_id) VALUES ($1, $2, $3)",
                        c.account(), c.cents(), context.id()));
        // end::transactional-job[]
        // tag::transactional-step[]
        WorkflowDefinition<Order> fulfil = WorkflowDefinition.builder("fulfil", Order.class)
                .step("reserve", StepHandler.<Order>transactional((context, transaction) -> run(transaction,
                                "UPDATE stock SET reserved = reserved + $1 WHERE sku = $2",
                                context.state().quantity(), context.state().sku())
                        .thenReturn(Outcome.next("ship", context.state()))))
                .step("ship", context -> Mono.just(Outcome.done("reserved " + context.state().quantity())))
                .build();
        // end::transactional-step[]
        JobDefinition<Order, String> shipJob = JobDefinition.of("ship", Order.class, this::ship);

        engine = DurableEngine.builder(db.engineOptions().queue(QueueOptions.builder("default").build()).build())
                .register(credit).register(shipJob).register(fulfil)
                .build();
        try (DurableEngine running = engine) {
            running.start().block();
            long paid = running.insert(JobRequest.of("credit", new Credit("ada", 500))).block();
            long shipped = running.insert(JobRequest.of("ship", new Order("tea", 2))).block();
            long fulfilled = running.insert(JobRequest.of("fulfil", new Order("tea", 3))).block();
            for (long id : new long[] {paid, shipped, fulfilled}) {
                Instance done = running.awaitSettled(id, Duration.ofSeconds(60)).block();
                assertThat(done.status()).as("instance %d", id).isEqualTo(InstanceStatus.DONE);
            }
            assertThat(Sql.query(db, "SELECT count(*) FROM public.ledger WHERE job_id = $1",
                    row -> row.get(0, Long.class), paid)).containsExactly(1L);
            assertThat(Sql.query(db, "SELECT reserved FROM public.stock", row -> row.get(0, Integer.class)))
                    .containsExactly(3);
            assertThat(Sql.query(db, "SELECT count(*) FROM public.shipments", row -> row.get(0, Long.class)))
                    .containsExactly(1L);
        }
    }
}
