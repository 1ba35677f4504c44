package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.CountingConnectionFactory;
import dev.durable.support.Engines;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** insertAsync: the bounded insert buffer, flushed by size or delay, drained by close. */
@ExtendWith(PostgresExtension.class)
class InsertAsyncIT {

    private static final Duration WAIT = Duration.ofMinutes(1);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private static JobDefinition<String, String> noop() {
        return JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue("async");
    }

    @Test
    void concurrentCallersShareRoundTripsAndEachGetsItsOwnId() {
        CountingConnectionFactory counting = new CountingConnectionFactory(db.connectionFactory());
        DurableEngine engine = engines.build(engines.options("batched").connectionFactory(counting)
                .insertBatchSize(50).insertBatchDelay(Duration.ofMillis(50)), noop());
        engine.migrate().block(WAIT);
        counting.reset();

        List<Long> ids = Flux.range(0, 200)
                .flatMap(i -> engine.insertAsync(JobRequest.of("noop", "n" + i)).map(id -> new long[] {i, id}), 200)
                .collectList()
                .block(WAIT)
                .stream()
                .sorted((a, b) -> Long.compare(a[0], b[0]))
                .map(pair -> pair[1])
                .toList();

        assertThat(new HashSet<>(ids)).hasSize(200);
        for (int i : new int[] {0, 77, 199}) {
            assertThat(engine.codec().decode(engine.get(ids.get(i)).block(WAIT).stateJson(), String.class))
                    .isEqualTo("n" + i);
        }
        long inserts = counting.count(sql -> sql.startsWith("INSERT INTO"));
        assertThat(inserts).as("insert round trips for 200 callers").isGreaterThanOrEqualTo(4).isLessThan(100);
    }

    @Test
    void aBrokenRequestAndARefusedKeyFailOnlyTheirOwnCallers() {
        DurableEngine engine = engines.build(engines.options("refusals")
                .insertBatchSize(10).insertBatchDelay(Duration.ofMillis(300)), noop());
        engine.migrate().block(WAIT);
        long holder = engine.insert(JobRequest.of("noop", "holder").correlationKey("taken")).block(WAIT);

        List<JobRequest> requests = List.of(
                JobRequest.of("noop", "first"),
                JobRequest.of("noop", "dup").correlationKey("taken"),
                JobRequest.of("noop", "pair-1").correlationKey("pair"),
                JobRequest.of("noop", "pair-2").correlationKey("pair"),
                JobRequest.of("unknown-type", "broken"),
                JobRequest.of("noop", "last"));
        List<CompletableFuture<Long>> answers = new ArrayList<>();
        for (JobRequest request : requests) {
            answers.add(engine.insertAsync(request).toFuture());
        }
        // The broken request is refused before it is buffered; the others wait for one flush.
        assertThat(answers.get(4)).isCompletedExceptionally();
        assertThatThrownBy(answers.get(4)::join).hasCauseInstanceOf(UnknownTypeException.class);

        assertThat(answers.get(0).join()).isPositive();
        assertThat(answers.get(5).join()).isPositive();
        assertThatThrownBy(answers.get(1)::join).isInstanceOf(CompletionException.class)
                .hasCauseInstanceOf(DuplicateCorrelationKeyException.class);
        long pair = answers.get(2).join();
        assertThatThrownBy(answers.get(3)::join).hasCauseInstanceOf(DuplicateCorrelationKeyException.class);
        assertThat(Sql.count(db, "correlation_key = 'pair'")).isEqualTo(1);
        assertThat(Sql.count(db, "correlation_key = 'taken'")).isEqualTo(1);
        assertThat(engine.get(pair).block(WAIT).correlationKey()).isEqualTo("pair");
        assertThat(engine.get(holder).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
    }

    @Test
    void aFullBufferInsertsDirectlyAndCloseFlushesWhatIsBuffered() {
        DurableEngine engine = engines.build(engines.options("full")
                .insertBufferCapacity(2).insertBatchSize(100).insertBatchDelay(Duration.ofHours(1)), noop());
        engine.migrate().block(WAIT);

        CompletableFuture<Long> first = engine.insertAsync(JobRequest.of("noop", "buffered-1")).toFuture();
        CompletableFuture<Long> second = engine.insertAsync(JobRequest.of("noop", "buffered-2")).toFuture();
        // The buffer holds two; the third goes straight to the database and answers at once.
        long direct = engine.insertAsync(JobRequest.of("noop", "direct")).block(WAIT);
        assertThat(engine.get(direct).block(WAIT)).isNotNull();
        // Neither size (100) nor delay (an hour) has come for the buffered two.
        assertThat(first).isNotDone();
        assertThat(second).isNotDone();
        assertThat(Sql.count(db, "state::text IN ('\"buffered-1\"', '\"buffered-2\"')")).isZero();

        engine.closeLater().block(WAIT);
        assertThat(first.join()).isPositive();
        assertThat(second.join()).isPositive().isNotEqualTo(first.join());
        assertThat(Sql.count(db, "state::text IN ('\"buffered-1\"', '\"buffered-2\"')")).isEqualTo(2);
        assertThatThrownBy(() -> engine.insertAsync(JobRequest.of("noop", "late")).block(WAIT))
                .isInstanceOf(EngineClosedException.class);
    }
}
