package dev.durable.spring.compat;

import dev.durable.DurableEngine;
import dev.durable.JobRequest;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Mono;

// tag::spring-outbox[]
@Service
class Orders {

    private final DatabaseClient database;
    private final DurableEngine engine;
    private final TransactionalOperator transaction;

    Orders(DatabaseClient database, DurableEngine engine, TransactionalOperator transaction) {
        this.database = database;
        this.engine = engine;
        this.transaction = transaction;
    }

    /** The order row and its shipping job commit together, or neither does. */
    Mono<Long> place(String orderId) {
        return database.sql("INSERT INTO orders (id) VALUES (:id)").bind("id", orderId).then()
                .then(engine.insert(JobRequest.of("ship", orderId)))   // joins the transaction
                .as(transaction::transactional);
    }

    /** The same with the annotation. */
    @Transactional
    public Mono<Long> placeAnnotated(String orderId) {
        return database.sql("INSERT INTO orders (id) VALUES (:id)").bind("id", orderId).then()
                .then(engine.insert(JobRequest.of("ship", orderId)));
    }
}
// end::spring-outbox[]
