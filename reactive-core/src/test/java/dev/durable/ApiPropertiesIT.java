package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Chars;
import dev.durable.support.ForAll;
import dev.durable.support.Gen;
import dev.durable.support.Gens;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Bad input, property-based ({@link ForAll}: seeded, replayable with {@code -Ddurable.seed}): random
 * queue names, types, payload sizes and shapes, priorities, times, keys and signal names against the
 * public API. Every call either succeeds (and the row reads back as asked) or fails with a documented
 * typed error ({@link InvalidRequestException} and its subtypes, {@link UnknownTypeException},
 * {@link DuplicateCorrelationKeyException}, {@link NoTargetException}); never a raw database
 * error, and the database stays consistent: a failed call writes nothing.
 */
class ApiPropertiesIT {

    record Shape(String name, List<Integer> numbers, Map<String, String> tags) {
    }

    record SignalCase(Long target, String name, Object payload, String dedupKey, boolean byKey,
            String correlationKey) {
    }

    record ListingCase(String queue, InstanceStatus status, long afterId, int limit, Long target) {
    }

    private static final int MAX_PAYLOAD = 2048;
    private static TestDatabase db;
    private static DurableEngine producer;
    private static final AtomicLong inserted = new AtomicLong();
    private static final List<Long> ids = new java.util.concurrent.CopyOnWriteArrayList<>();

    @BeforeAll
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

    @AfterAll
    static void stop() {
        producer.closeLater().block(Duration.ofSeconds(60));
        db.close();
    }

    // ---- properties -------------------------------------------------------------------------

    @Test
    void anInsertSucceedsAsAskedOrFailsTypedAndWritesNothing() {
        ForAll.check("anInsertSucceedsAsAskedOrFailsTypedAndWritesNothing", 300, requests(), request -> {
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
        }, ApiPropertiesIT::describe);
    }

    @Test
    void aBatchInsertsAllOrNothing() {
        ForAll.check("aBatchInsertsAllOrNothing", 100, Gens.lists(requests(), 1, 4), requests -> {
            try {
                List<Long> batch = producer.insertAll(requests).block(Duration.ofSeconds(30));
                assertThat(batch).hasSize(requests.size()).doesNotHaveDuplicates();
                inserted.addAndGet(batch.size());
                ids.addAll(batch);
            } catch (InvalidRequestException | DuplicateCorrelationKeyException expected) {
                assertThat(expected.getMessage()).isNotBlank();
            }
            assertConsistent();
        }, requests -> requests.stream().map(ApiPropertiesIT::describe).toList().toString());
    }

    @Test
    void aSignalIsDeliveredOrFailsTyped() {
        Gen<Long> targets = targets();
        Gen<String> names = names();
        Gen<Object> payloads = payloads();
        Gen<String> keys = keys();
        Gen<Boolean> booleans = Gens.booleans();
        Gen<SignalCase> cases = draw -> new SignalCase(targets.next(draw), names.next(draw), payloads.next(draw),
                keys.next(draw), booleans.next(draw), keys.next(draw));
        ForAll.check("aSignalIsDeliveredOrFailsTyped", 200, cases, signal -> {
            long before = signals();
            SignalResult result = null;
            try {
                result = signal.byKey() && signal.correlationKey() != null
                        ? producer.signal(signal.correlationKey(), signal.name(), signal.payload(), signal.dedupKey())
                                .block(Duration.ofSeconds(30))
                        : producer.signal(signal.target(), signal.name(), signal.payload(), signal.dedupKey())
                                .block(Duration.ofSeconds(30));
            } catch (InvalidRequestException | NoTargetException expected) {
                assertThat(expected.getMessage()).isNotBlank();
            }
            long after = signals();
            assertThat(after - before).isEqualTo(result == SignalResult.DELIVERED ? 1 : 0);
            assertThat(count("SELECT count(*) FROM {schema}.durable_signals s WHERE NOT EXISTS"
                    + " (SELECT 1 FROM {schema}.durable_instances i WHERE i.id = s.instance_id)")).isZero();
        });
    }

    @Test
    void listingAndCancellingNeverFailUntyped() {
        Gen<String> names = names();
        Gen<InstanceStatus> statuses = Gens.enums(InstanceStatus.class);
        Gen<Long> afterIds = Gens.longs();
        Gen<Integer> limits = Gens.ints();
        Gen<Long> targets = targets();
        Gen<ListingCase> cases = draw -> new ListingCase(names.next(draw), statuses.next(draw), afterIds.next(draw),
                limits.next(draw), targets.next(draw));
        ForAll.check("listingAndCancellingNeverFailUntyped", 100, cases, listing -> {
            try {
                List<Instance> page = producer.list(listing.queue(), listing.status(), listing.afterId(),
                        listing.limit()).collectList().block(Duration.ofSeconds(30));
                assertThat(page).allSatisfy(instance -> assertThat(instance.status()).isEqualTo(listing.status()));
            } catch (InvalidRequestException expected) {
                assertThat(expected.getMessage()).isNotBlank();
            }
            long target = listing.target();
            assertThat(producer.cancel(target, target % 2 == 0).block(Duration.ofSeconds(30))).isNotNull();
        });
    }

    // ---- generators -------------------------------------------------------------------------

    /** Requests: mostly known types, any priority, attempts and times in and out of range, keys. */
    static Gen<JobRequest> requests() {
        Gen<String> types = Gens.frequency(
                Gens.weighted(6, Gens.just("ping")),
                Gens.weighted(2, Gens.just("flow")),
                Gens.weighted(1, Gens.strings(Chars.valid(), 0, 12)));
        Gen<Object> payloads = payloads();
        Gen<String> queues = names().injectNull(0.4);
        Gen<Integer> priorities = Gens.ints();
        Gen<Integer> attempts = Gens.ints(-3, 1000).injectNull(0.5);
        Gen<Object> when = Gens.oneOf(
                Gens.just(null),
                Gens.longs(-5_000, 5_000).map(Duration::ofMillis),
                Gens.longs(-Long.MAX_VALUE / 2, Long.MAX_VALUE).map(Duration::ofSeconds),
                Gens.longs(Instant.MIN.getEpochSecond(), Instant.MAX.getEpochSecond()).map(Instant::ofEpochSecond),
                Gens.longs(-62_135_596_800L, 253_402_300_799L).map(Instant::ofEpochSecond));
        Gen<String> keys = keys();
        return draw -> {
            String type = types.next(draw);
            Object args = payloads.next(draw);
            String queue = queues.next(draw);
            int priority = priorities.next(draw);
            Integer max = attempts.next(draw);
            Object at = when.next(draw);
            String concurrency = keys.next(draw);
            String correlation = keys.next(draw);
            JobRequest request = JobRequest.of(type, args).priority(priority);
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
        };
    }

    /** Names: plain ones, any characters (NUL, lone surrogates, blanks), long ones. */
    static Gen<String> names() {
        return Gens.oneOf(
                Gens.strings(Chars.alphaNumeric("-_.:"), 1, 20),
                Gens.strings(Chars.all(), 0, 20),
                Gens.strings(Chars.of(" \t\u0000,é𝄞"), 0, 5),
                Gens.strings(Chars.alpha(), 120, 140));
    }

    /**
     * Keys: a few common ones (duplicates), any characters, up to past the limit of 1024 bytes, in
     * ASCII and in three-byte characters.
     */
    static Gen<String> keys() {
        return Gens.<String>oneOf(
                        Gens.of("c1", "c2", "c3"),
                        Gens.strings(Chars.all(), 0, 16),
                        Gens.strings(Chars.alpha(), 1000, 1100),
                        Gens.strings(Chars.cjk(), 330, 350))
                .injectNull(0.5);
    }

    /** Payload shapes and sizes: none, scalars, any text, nested maps and lists, records, past the limit. */
    static Gen<Object> payloads() {
        Gen<String> text = Gens.strings(Chars.all(), 0, 40);
        Gen<List<Integer>> fewNumbers = Gens.lists(Gens.ints(), 0, 5);
        Gen<Map<String, String>> fewTags = Gens.maps(text, text, 3);
        return Gens.<Object>oneOf(
                Gens.just(null),
                text,
                Gens.ints(),
                Gens.doubles(),
                Gens.maps(text, text, 5),
                Gens.lists(Gens.ints(), 0, 50),
                draw -> new Shape(text.next(draw), fewNumbers.next(draw), fewTags.next(draw)),
                Gens.strings(Chars.alpha(), MAX_PAYLOAD - 100, MAX_PAYLOAD + 100));
    }

    static Gen<Long> targets() {
        return Gens.oneOf(
                Gens.longs(),
                Gens.ints(0, 50).map(i -> ids.isEmpty() ? (long) i : ids.get(i % ids.size())));
    }

    /** A request with what its toString leaves out: the arguments and the attempts. */
    private static String describe(JobRequest request) {
        return request + " args=" + request.args() + " maxAttempts=" + request.maxAttempts();
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
