package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.From;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Bad input, property-based (jqwik): random queue names, types, payload sizes and shapes,
 * priorities, times, keys and signal names against the public API. Every call either succeeds
 * (and the row reads back as asked) or fails with a documented typed error
 * ({@link InvalidRequestException} and its subtypes, {@link UnknownTypeException},
 * {@link DuplicateCorrelationKeyException}, {@link NoTargetException}); never a raw database
 * error, and the database stays consistent: a failed call writes nothing.
 */
class ApiPropertiesIT {

    record Shape(String name, List<Integer> numbers, Map<String, String> tags) {
    }

    private static final int MAX_PAYLOAD = 2048;
    private static TestDatabase db;
    private static DurableEngine producer;
    private static final AtomicLong inserted = new AtomicLong();
    private static final List<Long> ids = new java.util.concurrent.CopyOnWriteArrayList<>();

    @BeforeContainer
    static void start() {
        db = TestPostgres.newDatabase("ApiPropertiesIT");
        // A producer: no queues, so what is inserted stays runnable and can be checked.
        producer = DurableEngine.builder(db.engineOptions().name("props").maxPayloadBytes(MAX_PAYLOAD).build())
                .register(JobDefinition.of("ping", String.class, (String s) -> Mono.just(s)).queue("pings"))
                .register(WorkflowDefinition.builder("flow", Shape.class)
                        .step("only", ctx -> Mono.just(Outcome.<Shape>done(null))).build())
                .build();
        producer.start().block(Duration.ofSeconds(60));
    }

    @AfterContainer
    static void stop() {
        producer.close().block(Duration.ofSeconds(60));
        db.close();
    }

    // ---- properties -------------------------------------------------------------------------

    @Property(tries = 300)
    void anInsertSucceedsAsAskedOrFailsTypedAndWritesNothing(@ForAll("requests") JobRequest request) {
        try {
            long id = producer.insert(request).block(Duration.ofSeconds(30));
            inserted.incrementAndGet();
            ids.add(id);
            Instance row = producer.get(id).block(Duration.ofSeconds(30));
            assertThat(row.type()).isEqualTo(request.type());
            assertThat(row.queue()).isEqualTo(request.queue() != null ? request.queue()
                    : request.type().equals("ping") ? "pings" : JobDefinition.DEFAULT_QUEUE);
            assertThat(row.priority()).isEqualTo(request.priority());
            assertThat(row.status()).isEqualTo(InstanceStatus.RUNNABLE);
            assertThat(row.correlationKey()).isEqualTo(request.correlationKey());
            assertThat(row.concurrencyKey()).isEqualTo(request.concurrencyKey());
            // JSON numbers compare as numbers (jsonb may print 5.9E14 as 590000000000000).
            if (request.args() != null && !(request.args() instanceof Double)) {
                assertThat(producer.codec().decode(row.stateJson(), Object.class))
                        .isEqualTo(producer.codec().decode(producer.codec().encode(request.args()), Object.class));
            }
        } catch (InvalidRequestException | DuplicateCorrelationKeyException expected) {
            assertThat(expected.getMessage()).isNotBlank();
        }
        assertConsistent();
    }

    @Property(tries = 100)
    void aBatchInsertsAllOrNothing(@ForAll @Size(min = 1, max = 4) List<@From("requests") JobRequest> requests) {
        try {
            List<Long> batch = producer.insertAll(requests).block(Duration.ofSeconds(30));
            assertThat(batch).hasSize(requests.size()).doesNotHaveDuplicates();
            inserted.addAndGet(batch.size());
            ids.addAll(batch);
        } catch (InvalidRequestException | DuplicateCorrelationKeyException expected) {
            assertThat(expected.getMessage()).isNotBlank();
        }
        assertConsistent();
    }

    @Property(tries = 200)
    void aSignalIsDeliveredOrFailsTyped(@ForAll("targets") Long target, @ForAll("names") String name,
            @ForAll("payloads") Object payload, @ForAll("keys") String dedupKey, @ForAll boolean byKey,
            @ForAll("keys") String correlationKey) {
        long before = signals();
        SignalResult result = null;
        try {
            result = byKey && correlationKey != null
                    ? producer.signal(correlationKey, name, payload, dedupKey).block(Duration.ofSeconds(30))
                    : producer.signal(target, name, payload, dedupKey).block(Duration.ofSeconds(30));
        } catch (InvalidRequestException | NoTargetException expected) {
            assertThat(expected.getMessage()).isNotBlank();
        }
        long after = signals();
        assertThat(after - before).isEqualTo(result == SignalResult.DELIVERED ? 1 : 0);
        assertThat(count("SELECT count(*) FROM {schema}.durable_signals s WHERE NOT EXISTS"
                + " (SELECT 1 FROM {schema}.durable_instances i WHERE i.id = s.instance_id)")).isZero();
    }

    @Property(tries = 100)
    void listingAndCancellingNeverFailUntyped(@ForAll("names") String queue, @ForAll InstanceStatus status,
            @ForAll long afterId, @ForAll int limit, @ForAll("targets") Long target) {
        try {
            List<Instance> page = producer.list(queue, status, afterId, limit).collectList().block(Duration.ofSeconds(30));
            assertThat(page).allSatisfy(instance -> assertThat(instance.status()).isEqualTo(status));
        } catch (InvalidRequestException expected) {
            assertThat(expected.getMessage()).isNotBlank();
        }
        assertThat(producer.cancel(target, target % 2 == 0).block(Duration.ofSeconds(30))).isNotNull();
    }

    // ---- generators -------------------------------------------------------------------------

    @Provide
    Arbitrary<JobRequest> requests() {
        Arbitrary<String> type = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(6, Arbitraries.just("ping")),
                net.jqwik.api.Tuple.of(2, Arbitraries.just("flow")),
                net.jqwik.api.Tuple.of(1, Arbitraries.strings().ofMaxLength(12)));
        Arbitrary<Integer> priority = Arbitraries.integers();
        Arbitrary<Integer> attempts = Arbitraries.integers().between(-3, 1000).injectNull(0.5);
        Arbitrary<Object> when = Arbitraries.oneOf(
                Arbitraries.just(null),
                Arbitraries.longs().between(-5_000, 5_000).map(Duration::ofMillis),
                Arbitraries.longs().between(-Long.MAX_VALUE / 2, Long.MAX_VALUE).map(Duration::ofSeconds),
                Arbitraries.longs().between(Instant.MIN.getEpochSecond(), Instant.MAX.getEpochSecond())
                        .map(Instant::ofEpochSecond),
                Arbitraries.longs().between(-62_135_596_800L, 253_402_300_799L).map(Instant::ofEpochSecond));
        return Combinators.combine(type, payloads(), names().injectNull(0.4), priority, attempts, when,
                        keys(), keys())
                .as((t, args, queue, p, max, at, concurrency, correlation) -> {
                    JobRequest request = JobRequest.of(t, args).priority(p);
                    if (queue != null) {
                        request = request.queue(queue);
                    }
                    if (max != null) {
                        request = request.maxAttempts(max);
                    }
                    if (at instanceof Duration in) {
                        request = request.runIn(in);
                    } else if (at instanceof Instant instant) {
                        request = request.runAt(instant);
                    }
                    if (concurrency != null) {
                        request = request.concurrencyKey(concurrency);
                    }
                    if (correlation != null) {
                        request = request.correlationKey(correlation);
                    }
                    return request;
                });
    }

    /** Names: plain ones, any characters (NUL, lone surrogates, blanks), long ones. */
    @Provide
    Arbitrary<String> names() {
        return Arbitraries.oneOf(
                Arbitraries.strings().alpha().numeric().withChars("-_.:").ofMinLength(1).ofMaxLength(20),
                Arbitraries.strings().all().ofMaxLength(20),
                Arbitraries.strings().withChars(" \t\u0000,é𝄞").ofMaxLength(5),
                Arbitraries.strings().alpha().ofMinLength(120).ofMaxLength(140));
    }

    /** Keys: a few common ones (duplicates), any characters, up to past the 1024 limit. */
    @Provide
    Arbitrary<String> keys() {
        return Arbitraries.oneOf(
                Arbitraries.of("c1", "c2", "c3"),
                Arbitraries.strings().all().ofMaxLength(16),
                Arbitraries.strings().alpha().ofMinLength(1000).ofMaxLength(1100))
                .injectNull(0.5);
    }

    /** Payload shapes and sizes: none, scalars, any text, nested maps and lists, records, past the limit. */
    @Provide
    Arbitrary<Object> payloads() {
        Arbitrary<String> text = Arbitraries.strings().all().ofMaxLength(40);
        return Arbitraries.oneOf(
                Arbitraries.just(null),
                text.map(s -> (Object) s),
                Arbitraries.integers().map(i -> (Object) i),
                Arbitraries.doubles().map(d -> (Object) d),
                Arbitraries.maps(text, text).ofMaxSize(5).map(m -> (Object) m),
                Arbitraries.integers().list().ofMaxSize(50).map(l -> (Object) l),
                Combinators.combine(text, Arbitraries.integers().list().ofMaxSize(5), Arbitraries.maps(text, text)
                        .ofMaxSize(3)).as(Shape::new).map(s -> (Object) s),
                Arbitraries.strings().alpha().ofMinLength(MAX_PAYLOAD - 100).ofMaxLength(MAX_PAYLOAD + 100)
                        .map(s -> (Object) s));
    }

    @Provide
    Arbitrary<Long> targets() {
        return Arbitraries.oneOf(
                Arbitraries.longs(),
                Arbitraries.integers().between(0, 50).map(i -> ids.isEmpty() ? (long) i : ids.get(i % ids.size())));
    }

    // ---- the database's state ---------------------------------------------------------------

    private static void assertConsistent() {
        // Nothing runs these rows: each is exactly as inserted, and a failed call wrote nothing.
        assertThat(count("SELECT count(*) FROM {schema}.durable_instances")).isEqualTo(inserted.get());
        assertThat(count("SELECT count(*) FROM {schema}.durable_instances WHERE status <> 'runnable'"
                + " OR claimed_by IS NOT NULL OR attempt <> 0 OR lease_expires_at IS NOT NULL")).isZero();
    }

    private static long signals() {
        return count("SELECT count(*) FROM {schema}.durable_signals");
    }

    private static long count(String sql) {
        return Flux.usingWhen(db.connectionFactory().create(),
                        (Connection c) -> Flux.from(c.createStatement(sql.replace("{schema}", '"' + db.schema() + '"'))
                                .execute()).flatMap(r -> r.map((row, meta) -> row.get(0, Long.class))),
                        Connection::close)
                .blockFirst(Duration.ofSeconds(30));
    }

    @SuppressWarnings("unused")
    private static List<Long> snapshot() {
        return new ArrayList<>(ids);
    }
}
