package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class ClientIT {

    record Order(String sku, int quantity) {
    }

    private static DurableEngine producer;
    private static TestDatabase db;

    @BeforeAll
    static void start(TestDatabase database) {
        db = database;
        // A producer: knows the types, runs no queue, so inserted rows stay put for inspection.
        producer = DurableEngine.builder(db.engineOptions().name("producer").maxPayloadBytes(1024).build())
                .register(JobDefinition.of("order", Order.class, (Order o) -> Mono.just(o.quantity())).queue("orders")
                        .maxAttempts(7))
                .register(JobDefinition.of("ping", String.class, (String s) -> Mono.just(s)))
                .build();
        producer.start().block();
    }

    @AfterAll
    static void stop() {
        producer.closeLater().block();
    }

    private static Instance get(long id) {
        return producer.get(id).block();
    }

    @Test
    void insertStoresTheRequestWithTheTypeDefaults() {
        long id = producer.insert(JobRequest.of("order", new Order("apple", 3)).priority(-5)).block();
        Instance instance = get(id);
        assertThat(instance.type()).isEqualTo("order");
        assertThat(instance.queue()).isEqualTo("orders");
        assertThat(instance.maxAttempts()).isEqualTo(7);
        assertThat(instance.priority()).isEqualTo(-5);
        assertThat(instance.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(instance.attempt()).isZero();
        assertThat(producer.codec().decode(instance.stateJson(), Order.class)).isEqualTo(new Order("apple", 3));
        assertThat(instance.claimedBy()).isNull();
        assertThat(producer.get(Long.MAX_VALUE).blockOptional()).isEmpty();
    }

    @Test
    void scheduledTimesComeFromTheDatabaseClock() {
        Instant dbNow = Sql.query(db, "SELECT now()", row -> row.get(0, Instant.class)).get(0);
        long later = producer.insert(JobRequest.of("ping", "x").runIn(Duration.ofHours(1))).block();
        Instant at = Instant.parse("2030-01-01T00:00:00Z");
        long fixed = producer.insert(JobRequest.of("ping", "y").runAt(at)).block();
        assertThat(get(later).eligibleAt()).isBetween(dbNow.plus(Duration.ofMinutes(59)), dbNow.plus(Duration.ofMinutes(61)));
        assertThat(get(fixed).eligibleAt()).isEqualTo(at);
    }

    @Test
    void insertAllIsOneRoundTripAndKeepsRequestOrder() {
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            requests.add(JobRequest.of("ping", "n" + i).queue("bulk"));
        }
        List<Long> ids = producer.insertAll(requests).block();
        assertThat(ids).hasSize(500).isSorted().doesNotHaveDuplicates();
        assertThat(producer.codec().decode(get(ids.get(123)).stateJson(), String.class)).isEqualTo("n123");
        List<Instance> page = producer.list("bulk", InstanceStatus.RUNNABLE, ids.get(99), 50).collectList().block();
        assertThat(page).extracting(Instance::id).containsExactlyElementsOf(ids.subList(100, 150));
    }

    @Test
    void aTransactionalInsertExistsOnlyIfTheCallersTransactionCommits() {
        String marker = "tx-" + System.nanoTime();
        Long rolledBack = Flux.usingWhen(db.connectionFactory().create(),
                        (Connection c) -> Mono.from(c.beginTransaction())
                                .then(producer.insert(c, JobRequest.of("ping", marker).queue("tx")))
                                .flatMap(id -> Mono.from(c.rollbackTransaction()).thenReturn(id)),
                        Connection::close)
                .blockLast();
        assertThat(producer.get(rolledBack).blockOptional()).isEmpty();

        Long committed = Flux.usingWhen(db.connectionFactory().create(),
                        (Connection c) -> Mono.from(c.beginTransaction())
                                .then(Mono.from(c.createStatement("CREATE TEMP TABLE business (v text)").execute())
                                        .flatMap(r -> Mono.from(r.getRowsUpdated())))
                                .then(producer.insert(c, JobRequest.of("ping", marker).queue("tx")))
                                .flatMap(id -> Mono.from(c.commitTransaction()).thenReturn(id)),
                        Connection::close)
                .blockLast();
        assertThat(get(committed).queue()).isEqualTo("tx");
    }

    @Test
    void eachBrokenRequestGetsItsTypedError() {
        assertThatThrownBy(() -> producer.insert(JobRequest.of("nope", 1)).block())
                .isInstanceOf(UnknownTypeException.class).hasMessageContaining("'nope'");
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x").queue(" ")).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("queue");
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x").maxAttempts(0)).block())
                .isInstanceOf(InvalidRequestException.class).hasMessage("maxAttempts must be at least 1, was 0");
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x").maxAttempts(-3)).block())
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x").runIn(Duration.ofSeconds(-1))).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("runIn");
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x").correlationKey("")).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("correlationKey");
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x").concurrencyKey(" ")).block())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("concurrencyKey");
        assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "x".repeat(2000))).block())
                .isInstanceOf(PayloadTooLargeException.class).hasMessageContaining("above the limit of 1024");
        assertThatThrownBy(() -> producer.insertAll(List.of()).block())
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> producer.list(null, null, 0, 0).blockLast())
                .isInstanceOf(InvalidRequestException.class);
        // A batch with one broken request inserts nothing.
        long before = Sql.count(db, "queue = 'atomic'");
        assertThatThrownBy(() -> producer.insertAll(List.of(JobRequest.of("ping", "a").queue("atomic"),
                JobRequest.of("nope", "b").queue("atomic"))).block()).isInstanceOf(UnknownTypeException.class);
        assertThat(Sql.count(db, "queue = 'atomic'")).isEqualTo(before);
    }

    @Test
    void aCorrelationKeyIsRefusedWhileLiveAndFreeOnceSettled(TestDatabase database) {
        DurableEngine worker = DurableEngine.builder(database.engineOptions().name("worker").queue("keys").build())
                .register(JobDefinition.of("ping", String.class, (String s) -> Mono.just(s)))
                .build();
        try {
            long first = producer.insert(JobRequest.of("ping", "1").queue("keys").correlationKey("order:42")).block();
            assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "2").queue("keys")
                    .correlationKey("order:42")).block())
                    .isInstanceOfSatisfying(DuplicateCorrelationKeyException.class,
                            e -> assertThat(e.correlationKey()).isEqualTo("order:42"));
            // Within one batch too, and the batch inserts nothing.
            assertThatThrownBy(() -> producer.insertAll(List.of(
                    JobRequest.of("ping", "3").queue("keys").correlationKey("order:43"),
                    JobRequest.of("ping", "4").queue("keys").correlationKey("order:43"))).block())
                    .isInstanceOf(DuplicateCorrelationKeyException.class);
            assertThat(Sql.count(database, "correlation_key = 'order:43'")).isZero();

            worker.start().block();
            Eventually.until("first settles", Duration.ofSeconds(20), () -> get(first).status() == InstanceStatus.DONE);
            long second = producer.insert(JobRequest.of("ping", "2").queue("keys").correlationKey("order:42")).block();
            assertThat(second).isNotEqualTo(first);

            // A key occupied in every status can be inserted at most once, ever.
            EnumSet<InstanceStatus> always = EnumSet.allOf(InstanceStatus.class);
            long once = producer.insert(JobRequest.of("ping", "o").queue("keys").correlationKey("once", always)).block();
            Eventually.until("once settles", Duration.ofSeconds(20), () -> get(once).status() == InstanceStatus.DONE);
            assertThatThrownBy(() -> producer.insert(JobRequest.of("ping", "o").queue("keys")
                    .correlationKey("once", always)).block())
                    .isInstanceOf(DuplicateCorrelationKeyException.class);
        } finally {
            worker.closeLater().block();
        }
    }

    @Test
    void cancelEndsRunnableInstancesAndSaysWhatItDid() {
        long id = producer.insert(JobRequest.of("ping", "c").queue("cancel")).block();
        assertThat(producer.cancel(id).block()).isEqualTo(CancelResult.CANCELLED);
        assertThat(get(id).status()).isEqualTo(InstanceStatus.CANCELLED);
        assertThat(producer.cancel(id).block()).isEqualTo(CancelResult.ALREADY_SETTLED);
        assertThat(producer.cancel(Long.MAX_VALUE).block()).isEqualTo(CancelResult.NOT_FOUND);
    }

    @Test
    void theSchemaRefusesRowsThatBreakItsInvariants() {
        long id = producer.insert(JobRequest.of("ping", "i").queue("inv")).block();
        // Executing without a claim, or an unknown status, is refused by the database itself.
        assertThatThrownBy(() -> Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing' WHERE id = $1", id))
                .hasMessageContaining("durable_instances_lease_check");
        assertThatThrownBy(() -> Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'lost' WHERE id = $1", id))
                .hasMessageContaining("durable_instances_status_check");
        assertThat(get(id).status()).isEqualTo(InstanceStatus.RUNNABLE);
    }
}
