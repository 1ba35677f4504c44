package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.CountingConnectionFactory;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** insertAll that skips duplicate correlation keys, naming the live holder of each. */
@ExtendWith(PostgresExtension.class)
class InsertSkipDuplicatesIT {

    private static final Duration WAIT = Duration.ofMinutes(1);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private DurableEngine producer(String name, CountingConnectionFactory counting) {
        EngineOptions.Builder options = engines.options(name);
        if (counting != null) {
            options.connectionFactory(counting);
        }
        DurableEngine engine = engines.build(options,
                JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue("skip"));
        engine.migrate().block(WAIT);
        return engine;
    }

    private static JobRequest keyed(String key) {
        return JobRequest.of("noop", key).correlationKey(key);
    }

    @Test
    void liveAndRepeatedKeysAreSkippedAndNamedInOneRoundTrip() {
        CountingConnectionFactory counting = new CountingConnectionFactory(db.connectionFactory());
        DurableEngine engine = producer("skipping", counting);
        long k1 = engine.insert(keyed("k1")).block(WAIT);
        long settled = engine.insert(keyed("k4")).block(WAIT);
        assertThat(engine.cancel(settled).block(WAIT)).isEqualTo(CancelResult.CANCELLED);

        counting.reset();
        List<InsertResult> results = engine.insertAll(List.of(keyed("k1"), keyed("k2"), keyed("k2"),
                JobRequest.of("noop", "no key"), keyed("k3"), keyed("k1"), keyed("k4")),
                InsertMode.SKIP_DUPLICATES).block(WAIT);
        assertThat(counting.count(sql -> true)).as("statements").isEqualTo(1);

        assertThat(results.get(0)).isEqualTo(new InsertResult(k1, false));
        assertThat(results.get(1).created()).isTrue();
        assertThat(results.get(2)).isEqualTo(new InsertResult(results.get(1).id(), false));
        assertThat(results.get(3).created()).isTrue();
        assertThat(results.get(4).created()).isTrue();
        assertThat(results.get(5)).isEqualTo(new InsertResult(k1, false));
        assertThat(results.get(6).created()).as("a settled instance holds its key no more").isTrue();
        assertThat(results.get(6).id()).isNotEqualTo(settled);
        List<Long> created = results.stream().filter(InsertResult::created).map(InsertResult::id).toList();
        assertThat(created).isSorted().doesNotHaveDuplicates();
        assertThat(engine.codec().decode(engine.get(results.get(4).id()).block(WAIT).stateJson(), String.class))
                .isEqualTo("k3");
        for (String key : List.of("k1", "k2", "k3", "k4")) {
            assertThat(Sql.count(db, "correlation_slot = '" + key + "'")).as(key).isEqualTo(1);
        }

        // The default still refuses the whole batch and inserts nothing.
        long before = Sql.count(db, "true");
        assertThatThrownBy(() -> engine.insertAll(List.of(keyed("k5"), keyed("k1"))).block(WAIT))
                .isInstanceOf(DuplicateCorrelationKeyException.class);
        assertThatThrownBy(() -> engine.insertAll(List.of(keyed("k5"), keyed("k5")), InsertMode.REJECT_DUPLICATES)
                .block(WAIT)).isInstanceOf(DuplicateCorrelationKeyException.class);
        assertThat(Sql.count(db, "true")).isEqualTo(before);
        assertThat(engine.insertAll(List.of(keyed("k5")), InsertMode.REJECT_DUPLICATES).block(WAIT))
                .singleElement().extracting(InsertResult::created).isEqualTo(true);
        assertThatThrownBy(() -> engine.insertAll(List.of(keyed("k6")), null).block(WAIT))
                .isInstanceOf(InvalidRequestException.class);
    }

    @Test
    void aHolderThatCommitsWhileTheBatchWaitsForItIsNamed() throws Exception {
        DurableEngine engine = producer("waiting-for-holder", null);
        for (boolean commit : new boolean[] {true, false}) {
            String key = "late-" + commit;
            // The holder is inserted in an open transaction: the batch's insert of the same key waits for it.
            Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
            try {
                Mono.from(connection.beginTransaction()).block(WAIT);
                long holder = engine.insert(connection, keyed(key)).block(WAIT);
                CompletableFuture<List<InsertResult>> batch = engine.insertAll(
                        List.of(keyed("free-" + commit), keyed(key)), InsertMode.SKIP_DUPLICATES).toFuture();
                Eventually.until("the batch waits for the holder's key", WAIT, () -> !Sql.query(db,
                        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                + " AND query LIKE 'WITH u AS MATERIALIZED%'",
                        row -> 1).isEmpty());
                assertThat(batch).isNotDone();
                Mono.from(commit ? connection.commitTransaction() : connection.rollbackTransaction()).block(WAIT);
                List<InsertResult> results = batch.get(1, TimeUnit.MINUTES);
                assertThat(results.get(0).created()).isTrue();
                if (commit) {
                    // Committed after the batch's snapshot: named by a second look, not inserted twice.
                    assertThat(results.get(1)).isEqualTo(new InsertResult(holder, false));
                } else {
                    assertThat(results.get(1).created()).isTrue();
                }
                assertThat(Sql.count(db, "correlation_slot = '" + key + "'")).isEqualTo(1);
            } finally {
                Mono.from(connection.close()).block(WAIT);
            }
        }
    }

    @Test
    void concurrentBatchesOverTheSameKeysEachGetTheLiveHolder() {
        DurableEngine engine = producer("racing", null);
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            keys.add("race-" + i);
        }
        // Four batches of the same keys in different orders, at once: each key is inserted once and
        // every batch names the same instance for it.
        List<List<InsertResult>> answers = Flux.range(0, 4)
                .flatMap(seed -> Mono.defer(() -> {
                    List<String> order = new ArrayList<>(keys);
                    Collections.shuffle(order, new Random(seed));
                    return engine.insertAll(order.stream().map(InsertSkipDuplicatesIT::keyed).toList(),
                            InsertMode.SKIP_DUPLICATES).map(results -> byKey(order, results));
                }).subscribeOn(Schedulers.parallel()), 4)
                .collectList()
                .block(WAIT)
                .stream()
                .map(map -> keys.stream().map(map::get).toList())
                .toList();
        for (int k = 0; k < keys.size(); k++) {
            int key = k;
            assertThat(answers.stream().filter(batch -> batch.get(key).created()).count()).isEqualTo(1);
            assertThat(answers.stream().map(batch -> batch.get(key).id()).distinct().count()).isEqualTo(1);
        }
        assertThat(Sql.count(db, "correlation_key LIKE 'race-%'")).isEqualTo(keys.size());

        // Now with holders cancelled under the batches: every answer names an instance of its key.
        AtomicBoolean stop = new AtomicBoolean();
        Map<String, Long> lastSeen = new ConcurrentHashMap<>();
        var canceller = Flux.interval(Duration.ofMillis(5))
                .onBackpressureDrop()
                .concatMap(tick -> Mono.defer(() -> {
                    Long id = lastSeen.get(keys.get((int) (tick % keys.size())));
                    return id == null ? Mono.empty() : engine.cancel(id).then();
                }), 0)
                .takeUntil(tick -> stop.get())
                .subscribe();
        try {
            Flux.range(0, 40)
                    .flatMap(round -> Mono.defer(() -> {
                        List<String> order = new ArrayList<>(keys);
                        Collections.shuffle(order, new Random(round));
                        return engine.insertAll(order.stream().map(InsertSkipDuplicatesIT::keyed).toList(),
                                        InsertMode.SKIP_DUPLICATES)
                                .flatMapMany(results -> Flux.fromIterable(byKey(order, results).entrySet()))
                                .doOnNext(entry -> lastSeen.put(entry.getKey(), entry.getValue().id()))
                                .concatMap(entry -> engine.get(entry.getValue().id())
                                        .doOnNext(instance -> assertThat(instance.correlationKey())
                                                .isEqualTo(entry.getKey())))
                                .then();
                    }), 4)
                    .blockLast(Duration.ofMinutes(3));
        } finally {
            stop.set(true);
            canceller.dispose();
        }
        assertThat(lastSeen).hasSize(keys.size());
    }

    private static Map<String, InsertResult> byKey(List<String> order, List<InsertResult> results) {
        assertThat(results).hasSameSizeAs(order);
        Map<String, InsertResult> map = new HashMap<>();
        for (int i = 0; i < order.size(); i++) {
            map.put(order.get(i), results.get(i));
        }
        return map;
    }
}
