package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.durable.support.Engines;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.R2dbcException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Keys, priorities and batches at their bounds (issue 18): a key is checked by its UTF-8 bytes,
 * so no key the API accepts can make PostgreSQL refuse an index row later (at a pick, a commit, a
 * signal) and stall a queue; the true bound of each index is measured here, so the documented
 * margin stays true; a batch and a priority have documented bounds with typed errors.
 */
@ExtendWith(PostgresExtension.class)
class KeyBoundsIT {

    private static final Duration WAIT = Duration.ofSeconds(30);
    /** 1,024 CJK characters: 1,024 characters, 3,072 bytes (the repro). */
    private static final String CJK_1024 = cjk(new Random(18), 1024);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    @Test
    void aKeyOf1024CjkCharactersIsRefusedAtTheApiAndTheQueueRunsOn() {
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class, (String s) -> Mono.just(s))
                .queue("default");
        DurableEngine engine = engines.start(engines.options("cjk").gate("g", 2).rateLimit("r", 100, 10)
                .queue(QueueOptions.builder("default").pollInterval(Duration.ofMillis(50)).build()), echo);
        assertThat(CJK_1024).hasSize(1024);
        assertThat(CJK_1024.getBytes(StandardCharsets.UTF_8)).hasSize(3072);

        // The repro: this insert used to pass, and every later pick of the queue failed.
        assertThatThrownBy(() -> engine.insert(JobRequest.of("echo", "x").concurrencyKey(CJK_1024)).block(WAIT))
                .isInstanceOf(InvalidRequestException.class)
                .hasMessageContaining("concurrencyKey must be at most 1024 bytes in UTF-8, was 3072 bytes");
        for (JobRequest request : List.of(JobRequest.of("echo", "x").correlationKey(CJK_1024),
                JobRequest.of("echo", "x").gate("g", CJK_1024),
                JobRequest.of("echo", "x").rateLimit("r", 1, CJK_1024))) {
            assertThatThrownBy(() -> engine.insert(request).block(WAIT)).as(request.toString())
                    .isInstanceOf(InvalidRequestException.class).hasMessageContaining("3072 bytes");
        }
        long parked = engine.insert(JobRequest.of("echo", "y").queue("parked")).block(WAIT);
        assertThatThrownBy(() -> engine.signal(parked, "go", null, CJK_1024).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("dedupKey must be at most");
        assertThatThrownBy(() -> engine.signal(CJK_1024, "go", null, null).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("correlationKey must be at most");
        assertThatThrownBy(() -> Outcome.next("s", "state").concurrencyKey(CJK_1024))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("3072 bytes");
        assertThatThrownBy(() -> Outcome.next("s", "state").gate("g", CJK_1024))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("1024 bytes");
        assertThatThrownBy(() -> Outcome.next("s", "state").rateLimit("r", 1, CJK_1024))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("3072 bytes");

        // Nothing of them was written, and the queue runs on.
        assertThat(Sql.count(db, "queue = 'default'")).isZero();
        long id = engine.insert(JobRequest.of("echo", "after")).block(WAIT);
        assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void theLongestKeysAndNamesTheApiAcceptsRunThroughEveryIndex() {
        Random random = new Random(1024);
        // The longest names (128 characters, 384 bytes; a queue name is ASCII) and keys of exactly
        // MAX_KEY_BYTES, random so PostgreSQL cannot compress them under an index's limit.
        StringBuilder name = new StringBuilder("q");
        while (name.length() < 128) {
            name.append(Character.forDigit(random.nextInt(36), 36));
        }
        String queue = name.toString();
        String gate = cjk(random, 128);
        String rate = cjk(random, 128);
        String signal = cjk(random, 128);
        String type = cjk(random, 128);
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            String key = cjk(random, JobRequest.MAX_KEY_BYTES / 3) + "k";
            assertThat(key.getBytes(StandardCharsets.UTF_8)).hasSize(JobRequest.MAX_KEY_BYTES);
            keys.add(key);
        }
        JobDefinition<String, String> job = JobDefinition.of(type, String.class, (String s) -> Mono.just(s))
                .queue(queue);
        WorkflowDefinition<String> flow = WorkflowDefinition.builder("flow", String.class).queue(queue)
                .step("begin", ctx -> Mono.just(Outcome.next("keyed", ctx.state()).concurrencyKey(keys.get(5))))
                .step("keyed", ctx -> Mono.just(Outcome.next("gated", ctx.state()).gate(gate, keys.get(6))))
                .step("gated", ctx -> Mono.just(Outcome.next("limited", ctx.state()).rateLimit(rate, 1, keys.get(7))))
                .step("limited", ctx -> Mono.just(Outcome.await(Set.of(signal), "end", ctx.state())))
                // Parks again, so the duplicate below still finds the instance live.
                .step("end", ctx -> Mono.just(Outcome.await(Set.of("finish"), "last",
                        String.valueOf(ctx.signals().size()))))
                .step("last", ctx -> Mono.just(Outcome.done(Integer.parseInt(ctx.state()))))
                .build();
        DurableEngine engine = engines.start(engines.options("longest").gate(gate, 2).rateLimit(rate, 1000, 100)
                .queue(QueueOptions.builder(queue).pollInterval(Duration.ofMillis(50)).build()), job, flow);

        List<Long> ids = engine.insertAll(List.of(
                JobRequest.of(type, "a").concurrencyKey(keys.get(0)),
                JobRequest.of(type, "b").correlationKey(keys.get(1)),
                JobRequest.of(type, "c").gate(gate, keys.get(2)),
                JobRequest.of(type, "d").rateLimit(rate, 1, keys.get(3)),
                JobRequest.of(type, "e").priority(JobRequest.MIN_PRIORITY),
                JobRequest.of(type, "f").priority(JobRequest.MAX_PRIORITY))).block(WAIT);
        long workflow = engine.insert(JobRequest.of("flow", "w").correlationKey(keys.get(4))).block(WAIT);
        for (long id : ids) {
            Instance done = engine.awaitSettled(id, WAIT).block();
            assertThat(done.status()).as("instance %d: %s", id, done.lastError()).isEqualTo(InstanceStatus.DONE);
        }
        assertThat(engine.awaitSettledOrParked(workflow, WAIT).block().status())
                .isEqualTo(InstanceStatus.AWAITING_SIGNAL);
        assertThat(engine.signal(keys.get(4), signal, Map.of("n", 1), keys.get(0)).block(WAIT))
                .isEqualTo(SignalResult.DELIVERED);
        assertThat(engine.signal(keys.get(4), signal, Map.of("n", 1), keys.get(0)).block(WAIT))
                .isEqualTo(SignalResult.DUPLICATE);
        assertThat(engine.signal(workflow, "finish", null, null).block(WAIT)).isEqualTo(SignalResult.DELIVERED);
        Instance flowDone = engine.awaitSettled(workflow, WAIT).block();
        assertThat(flowDone.status()).as(flowDone.lastError()).isEqualTo(InstanceStatus.DONE);
        assertThat(flowDone.resultJson()).isEqualTo("1");
    }

    /**
     * The true bounds, measured: an incompressible value of the bound's length fits each index, one
     * byte more is refused (54000). With names at their longest (384 bytes) where an index has one.
     * {@link JobRequest#MAX_KEY_BYTES} must stay under all of them.
     */
    @Test
    void eachIndexTakesWhatItsDocumentedBoundSaysAndTheKeyLimitIsBelowAll() {
        Random random = new Random(2704);
        String name = cjk(random, 128);
        Map<String, Integer> bounds = Map.of("concurrency key", 2692, "correlation key", 2692, "dedup key", 2684,
                "gate key", 2300, "rate partition", 2304, "queue", 2672);
        for (Map.Entry<String, Integer> bound : bounds.entrySet()) {
            assertThat(JobRequest.MAX_KEY_BYTES).isLessThan(bound.getValue());
            for (int trial = 0; trial < 3; trial++) {
                String fits = ascii(random, bound.getValue());
                String over = ascii(random, bound.getValue() + 1);
                assertThat(refusal(bound.getKey(), fits, name)).as(bound.getKey() + " at its bound").isNull();
                assertThat(refusal(bound.getKey(), over, name)).as(bound.getKey() + " one byte past")
                        .isEqualTo("54000");
            }
        }
    }

    /** Writes one row with {@code value} where the index of {@code what} reads it; null or the SQLSTATE. */
    private String refusal(String what, String value, String name) {
        String sql = switch (what) {
            case "concurrency key" -> "INSERT INTO {schema}.durable_instances (type, queue, step, max_attempts,"
                    + " status, claimed_by, lease_expires_at, concurrency_key) VALUES ('t', 'probe', 's', 1,"
                    + " 'executing', 'w', now(), $1)";
            case "correlation key" -> "INSERT INTO {schema}.durable_instances (type, queue, step, max_attempts,"
                    + " correlation_key, correlation_statuses) VALUES ('t', 'probe', 's', 1, $1, '{runnable}')";
            case "dedup key" -> "INSERT INTO {schema}.durable_signals (instance_id, name, dedup_key)"
                    + " VALUES (9223372036854775807, 'n', $1)";
            case "gate key" -> "INSERT INTO {schema}.durable_gate_slots (key, gate, shard, capacity, held)"
                    + " VALUES ($1, $2, 1, 1, 0)";
            case "rate partition" -> "INSERT INTO {schema}.durable_rate_buckets (partition_key, name, tokens)"
                    + " VALUES ($1, $2, 1)";
            case "queue" -> "INSERT INTO {schema}.durable_instances (type, queue, step, max_attempts)"
                    + " VALUES ('t', $1, 's', 1)";
            default -> throw new IllegalArgumentException(what);
        };
        try {
            if (sql.contains("$2")) {
                Sql.update(db, sql, value, name);
            } else {
                Sql.update(db, sql, value);
            }
        } catch (R2dbcException refused) {
            return refused.getSqlState();
        }
        Sql.update(db, "DELETE FROM {schema}.durable_instances WHERE queue = 'probe' OR queue = $1", value);
        Sql.update(db, "DELETE FROM {schema}.durable_signals WHERE dedup_key = $1", value);
        Sql.update(db, "DELETE FROM {schema}.durable_gate_slots WHERE key = $1", value);
        Sql.update(db, "DELETE FROM {schema}.durable_rate_buckets WHERE partition_key = $1", value);
        return null;
    }

    @Test
    void priorityIsBoundedAndDocumented() {
        DurableEngine producer = engines.start(engines.options("priorities").rejectUnknownTypes(false));
        for (int priority : List.of(Integer.MIN_VALUE, JobRequest.MIN_PRIORITY - 1, JobRequest.MAX_PRIORITY + 1,
                Integer.MAX_VALUE)) {
            assertThatThrownBy(() -> producer.insert(JobRequest.of("t", null).queue("p").priority(priority)).block(WAIT))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("priority must be -32768 to 32767, was " + priority);
        }
        long low = producer.insert(JobRequest.of("t", null).queue("p").priority(JobRequest.MIN_PRIORITY)).block(WAIT);
        long high = producer.insert(JobRequest.of("t", null).queue("p").priority(JobRequest.MAX_PRIORITY)).block(WAIT);
        assertThat(producer.get(low).block(WAIT).priority()).isEqualTo(-32_768);
        assertThat(producer.get(high).block(WAIT).priority()).isEqualTo(32_767);
        assertThat(Sql.count(db, "queue = 'p'")).isEqualTo(2);
    }

    @Test
    void aBatchPastItsAggregateBoundIsRefusedWholeAndTyped() {
        // The repro with the defaults: 48 payloads of 1 MiB each used to be accepted whole.
        DurableEngine producer = engines.start(engines.options("batches").rejectUnknownTypes(false));
        String mebibyte = "x".repeat(EngineOptions.DEFAULT_MAX_PAYLOAD_BYTES - 2); // its JSON: 1 MiB exactly
        List<JobRequest> huge = Collections.nCopies(48, JobRequest.of("t", mebibyte).queue("b"));
        Throwable refused = catchThrowable(() -> producer.insertAll(huge).block(WAIT));
        assertThat(refused).isInstanceOf(BatchTooLargeException.class)
                .hasMessageContaining("a batch of 48 requests is over 16777216 bytes");
        BatchTooLargeException typed = (BatchTooLargeException) refused;
        assertThat(typed.limit()).isEqualTo(EngineOptions.DEFAULT_MAX_BATCH_BYTES);
        // Counted as built: it stopped at the first request past the limit.
        assertThat(typed.bytes()).isLessThanOrEqualTo(EngineOptions.DEFAULT_MAX_BATCH_BYTES + (2L << 20));
        assertThat(catchThrowable(() -> producer.insertAll(huge, InsertMode.SKIP_DUPLICATES).block(WAIT)))
                .isInstanceOf(BatchTooLargeException.class);
        // One request alone is bounded by maxPayloadBytes, and a batch under the bound goes in.
        assertThat(producer.insert(JobRequest.of("t", mebibyte).queue("b")).block(WAIT)).isPositive();
        assertThat(producer.insertAll(huge.subList(0, 15)).block(WAIT)).hasSize(15);
        assertThat(Sql.count(db, "queue = 'b'")).isEqualTo(16);

        // Children: a step spawning past the bound fails its instance at once, with the reason.
        WorkflowDefinition<String> spawner = WorkflowDefinition.builder("spawner", String.class).queue("s")
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(
                        Collections.nCopies(8, JobRequest.of("t", "y".repeat(1000)).queue("kids")), "join", "s")))
                .step("join", ctx -> Mono.just(Outcome.done(null)))
                .build();
        DurableEngine engine = engines.start(engines.options("spawns").rejectUnknownTypes(false).maxPayloadBytes(2048)
                .maxBatchBytes(4096).queue(QueueOptions.builder("s").pollInterval(Duration.ofMillis(50)).build()),
                spawner);
        long id = engine.insert(JobRequest.of("spawner", "go")).block(WAIT);
        Instance failed = engine.awaitSettled(id, WAIT).block();
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.lastError()).contains("a batch of 8 requests is over 4096 bytes");
        assertThat(failed.attempt()).isEqualTo(1);
        assertThat(Sql.count(db, "queue = 'kids'")).isZero();
    }

    /** {@code n} random CJK unified ideographs (3 bytes each in UTF-8). */
    static String cjk(Random random, int n) {
        StringBuilder text = new StringBuilder(n);
        for (int i = 0; i < n; i++) {
            text.append((char) (0x4e00 + random.nextInt(0x9fff - 0x4e00)));
        }
        return text.toString();
    }

    /** {@code n} random printable ASCII characters: incompressible for PostgreSQL's pglz. */
    private static String ascii(Random random, int n) {
        StringBuilder text = new StringBuilder(n);
        for (int i = 0; i < n; i++) {
            text.append((char) ('!' + random.nextInt(94)));
        }
        return text.toString();
    }
}
