package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.poke.PokeContext;
import dev.durable.poke.PokeTransport;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.poke.PokeTransports;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Which inserts poke (only rows due now), and an engine with no pokes at all. */
@ExtendWith(PostgresExtension.class)
class PokesIT {

    private static final Duration WAIT = Duration.ofMinutes(1);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    /** The local transport, recording every poke sent through it (at once or on the caller's commit). */
    static final class Recording implements PokeTransportFactory {

        final List<String> pokes = new CopyOnWriteArrayList<>();

        @Override
        public Mono<PokeTransport> create(PokeContext context) {
            return PokeTransports.local().create(context).map(local -> new PokeTransport() {
                @Override
                public void poke(String queue) {
                    pokes.add(queue);
                    local.poke(queue);
                }

                @Override
                public Flux<String> pokes() {
                    return local.pokes();
                }

                @Override
                public Mono<Void> pokeOnCommit(Connection connection, String queue) {
                    pokes.add("on-commit:" + queue);
                    return local.pokeOnCommit(connection, queue);
                }

                @Override
                public Mono<Void> close() {
                    return local.close();
                }
            });
        }
    }

    private static JobDefinition<String, String> noop() {
        return JobDefinition.of("noop", String.class, (String s) -> Mono.just(s));
    }

    @Test
    void onlyRowsDueNowPokeTheirQueue() {
        Recording recording = new Recording();
        // A producer: runs no queue, so no row is claimed on insert and every due row is poked.
        DurableEngine producer = engines.start(engines.options("producer").pokeTransport(recording)
                .runMaintenance(false), noop());

        producer.insert(JobRequest.of("noop", "later").queue("later").runIn(Duration.ofHours(1))).block(WAIT);
        producer.insert(JobRequest.of("noop", "at").queue("at").runAt(Instant.now().plus(Duration.ofHours(1))))
                .block(WAIT);
        producer.insertAll(List.of(JobRequest.of("noop", "a").queue("later").runIn(Duration.ofMinutes(5)),
                JobRequest.of("noop", "b").queue("at").runIn(Duration.ofDays(1)))).block(WAIT);
        Flux.usingWhen(db.connectionFactory().create(),
                (Connection c) -> Mono.from(c.beginTransaction())
                        .then(producer.insert(c, JobRequest.of("noop", "tx").queue("later").runIn(Duration.ofHours(1))))
                        .then(Mono.from(c.commitTransaction())),
                Connection::close).blockLast(WAIT);
        assertThat(recording.pokes).as("pokes of rows scheduled for later").isEmpty();

        // Due now: no run time, a run time in the past (by the database clock), a zero delay.
        producer.insert(JobRequest.of("noop", "now").queue("now")).block(WAIT);
        producer.insert(JobRequest.of("noop", "past").queue("past").runAt(Instant.now().minus(Duration.ofHours(1))))
                .block(WAIT);
        producer.insertAll(List.of(JobRequest.of("noop", "c").queue("later").runIn(Duration.ofHours(1)),
                JobRequest.of("noop", "d").queue("mixed").runIn(Duration.ZERO))).block(WAIT);
        Flux.usingWhen(db.connectionFactory().create(),
                (Connection c) -> Mono.from(c.beginTransaction())
                        .then(producer.insert(c, JobRequest.of("noop", "tx").queue("tx-now")))
                        .then(Mono.from(c.commitTransaction())),
                Connection::close).blockLast(WAIT);
        assertThat(recording.pokes).containsExactly("now", "past", "mixed", "on-commit:tx-now");
    }

    @Test
    void withNoPokesWorkWaitsForThePollAndNoSchedulerIsEverPoked() {
        DurableEngine quiet = engines.start(engines.options("quiet").pokeTransport(PokeTransports.none())
                        .queue(QueueOptions.builder("quiet").pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build()),
                noop().queue("quiet"), waitsForGo("quiet"));
        DurableEngine control = engines.start(engines.options("control")
                        .queue(QueueOptions.builder("control").pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build()),
                noop().queue("control"), waitsForGo("control"));

        for (DurableEngine engine : List.of(quiet, control)) {
            String queue = engine.queueStats().get(0).queue();
            // Concurrency keys keep the rows from being claimed by the insert itself: they must be picked.
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                requests.add(JobRequest.of("noop", "n" + i).queue(queue).concurrencyKey(queue + "-" + i));
            }
            List<Long> ids = engine.insertAll(requests).block(WAIT);
            long workflow = engine.insert(JobRequest.of("waits-for-go", "w").queue(queue)).block(WAIT);
            engines.awaitStatus(engine, workflow, InstanceStatus.AWAITING_SIGNAL, WAIT);
            assertThat(engine.signal(workflow, "go", null, null).block(WAIT)).isEqualTo(SignalResult.DELIVERED);
            for (long id : ids) {
                assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
            assertThat(engine.awaitSettled(workflow, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        }

        QueueStats quietStats = quiet.queueStats("quiet").orElseThrow();
        assertThat(quietStats.pokesHandled()).isZero();
        assertThat(quietStats.picks(PickTrigger.POKE)).isZero();
        // Its work was found by picks of its own (the poll's, or a freed slot's on a slow machine).
        assertThat(quietStats.picks(PickTrigger.POLL) + quietStats.picks(PickTrigger.DEMAND)
                + quietStats.picks(PickTrigger.PICKED_FULL)).isPositive();
        // The same work on the default transport pokes its own schedulers: the counters can tell.
        Eventually.until("control poked", WAIT, () -> control.queueStats("control").orElseThrow().pokesHandled() > 0);
        assertThat(PokeTransports.none()).hasToString("none");
    }

    private static WorkflowDefinition<String> waitsForGo(String queue) {
        return WorkflowDefinition.builder("waits-for-go", String.class)
                .queue(queue)
                .step("start", ctx -> Mono.just(Outcome.await(Set.of("go"), "end", ctx.state(), Duration.ofMinutes(5))))
                .step("end", ctx -> Mono.just(Outcome.done(ctx.state())))
                .build();
    }
}
