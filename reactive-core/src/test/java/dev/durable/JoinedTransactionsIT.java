package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Engines;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * A plain insert inside a caller's transaction joins it ({@link CallerTransactions}): gone with a
 * rollback, there with a commit and poked only then, so it starts at once and not at the next poll.
 * The Spring Boot starter's IT runs the same with Spring's {@code TransactionalOperator}.
 */
@ExtendWith(PostgresExtension.class)
class JoinedTransactionsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final String KEY = "test.transaction";

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    /** A transaction a test opens by hand, found in the Reactor context under {@link #KEY}. */
    private static final class Manual implements CallerTransactions.Joined {
        final Connection connection;
        final List<Runnable> afterCommit = new CopyOnWriteArrayList<>();

        Manual(Connection connection) {
            this.connection = connection;
        }

        @Override
        public Connection connection() {
            return connection;
        }

        @Override
        public void afterCommit(Runnable action) {
            afterCommit.add(action);
        }

        Mono<Void> commit() {
            return Mono.from(connection.commitTransaction()).doOnSuccess(done -> afterCommit.forEach(Runnable::run));
        }
    }

    @Test
    void anInsertJoinsTheCallersTransactionAndStartsAsItCommits() {
        // Polls a minute apart after an idle start: only a poke after the commit can start the job soon.
        DurableEngine engine = DurableEngine.builder(engines.options("joined")
                        .queue(QueueOptions.builder("outbox").pollInterval(Duration.ofMinutes(1))
                                .maxPollInterval(Duration.ofMinutes(1)).build()).build())
                .register(JobDefinition.of("ship", String.class, (String order) -> Mono.just("shipped " + order))
                        .queue("outbox"))
                .joinTransactions(connections -> Mono.deferContextual(context ->
                        Mono.justOrEmpty(context.<Manual>getOrEmpty(KEY))))
                .build();
        engines.track(engine);
        engine.start().block(WAIT);

        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Manual rolledBack = new Manual(connection);
            Mono.from(connection.beginTransaction()).block(WAIT);
            long gone = engine.insert(JobRequest.of("ship", "o-1")).contextWrite(c -> c.put(KEY, rolledBack)).block(WAIT);
            Mono.from(connection.rollbackTransaction()).block(WAIT);
            assertThat(engine.get(gone).blockOptional()).isEmpty();
            assertThat(rolledBack.afterCommit).hasSize(1); // registered, never run

            Manual committed = new Manual(connection);
            Mono.from(connection.beginTransaction()).block(WAIT);
            long kept = engine.insert(JobRequest.of("ship", "o-2")).contextWrite(c -> c.put(KEY, committed)).block(WAIT);
            // Not visible outside the transaction until it commits.
            assertThat(engine.get(kept).blockOptional()).isEmpty();
            committed.commit().block(WAIT);
            Instance done = engine.awaitSettled(kept, Duration.ofSeconds(30)).block();
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);

            Mono.from(connection.beginTransaction()).block(WAIT);
            assertThatThrownBy(() -> engine.insertAll(List.of(JobRequest.of("ship", "o-3")), InsertMode.SKIP_DUPLICATES)
                    .contextWrite(c -> c.put(KEY, new Manual(connection))).block(WAIT))
                    .isInstanceOf(InvalidRequestException.class).hasMessageContaining("does not join");
            long async = engine.insertAsync(JobRequest.of("ship", "o-4"))
                    .contextWrite(c -> c.put(KEY, new Manual(connection))).block(WAIT);
            Mono.from(connection.rollbackTransaction()).block(WAIT);
            assertThat(engine.get(async).blockOptional()).isEmpty();
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
        // Outside any transaction, inserts go on as ever.
        long plain = engine.insert(JobRequest.of("ship", "o-5")).block(WAIT);
        assertThat(engine.awaitSettled(plain, Duration.ofSeconds(30)).block().status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void aRunCompletedInsideTheJoinedTransactionSettlesWithItsCommit() {
        DurableEngine[] engine = new DurableEngine[1];
        JobDefinition<String, String> ship = JobDefinition.of("ship", String.class, (String order, JobContext context) ->
                        Mono.usingWhen(db.connectionFactory().create(), connection -> {
                            Manual transaction = new Manual(connection);
                            return Mono.from(connection.beginTransaction())
                                    .then(engine[0].complete(context.claim(), "joined " + order)
                                            .contextWrite(c -> c.put(KEY, transaction)))
                                    .then(transaction.commit());
                        }, Connection::close)
                        .thenReturn("own"))
                .queue("joined-complete");
        engine[0] = DurableEngine.builder(engines.options("joined-complete")
                        .queue(QueueOptions.builder("joined-complete").pollInterval(Duration.ofMillis(50)).build()).build())
                .register(ship)
                .joinTransactions(connections -> Mono.deferContextual(context ->
                        Mono.justOrEmpty(context.<Manual>getOrEmpty(KEY))))
                .build();
        engines.track(engine[0]);
        engine[0].start().block(WAIT);

        long id = engine[0].insert(JobRequest.of("ship", "o-6")).block(WAIT);
        Instance done = engine[0].awaitSettled(id, Duration.ofSeconds(30)).block();
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"joined o-6\"");
        // Outside a transaction there is nothing to join: a typed error, not a commit of its own.
        assertThatThrownBy(() -> engine[0].complete(new Claim(id, "ship", JobDefinition.STEP, "nobody", 1), "x").block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("no transaction to join");
    }
}
