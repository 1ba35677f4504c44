package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.JobEvent.Kind;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The event stream as a dashboard reads it: the events of one instance in the order of what
 * happened to it (an insert before its pick, a retry before its re-pick), and the type on every
 * event, whatever made it (a signal, an expired await, a cancel, a woken parent).
 */
@ExtendWith(PostgresExtension.class)
class EventsIT {

    private static final Duration WAIT = Duration.ofSeconds(90);

    @RegisterExtension
    final Engines engines = new Engines();

    @BeforeEach
    void setUp(TestDatabase database) {
        engines.on(database);
    }

    @Test
    void eachInstancesEventsComeInTheOrderOfWhatHappened() {
        // Fast, concurrent, retried work with claim-on-insert, pokes and polls all racing the
        // callers that report inserts and the runs that report retries.
        Set<Long> failedOnce = ConcurrentHashMap.newKeySet();
        DurableEngine engine = engines.start(engines.options("ordered")
                        .handlerScheduler(Schedulers.parallel())
                        .queue(QueueOptions.builder("ordered").concurrency(8).prefetch(8)
                                .pollInterval(Duration.ofMillis(2)).maxPollInterval(Duration.ofMillis(2)).build()),
                JobDefinition.of("twice", Integer.class, (Integer n, JobContext context) ->
                                failedOnce.add(context.id()) ? Mono.<Integer>error(new IllegalStateException("again"))
                                        : Mono.just(n))
                        .queue("ordered").backoff(Backoff.fixed(Duration.ofMillis(1))));
        List<JobEvent> events = new CopyOnWriteArrayList<>();
        Disposable subscription = engine.events().subscribe(events::add);
        int jobs = 300;
        List<Long> ids = new ArrayList<>();
        for (int batch = 0; batch < jobs / 10; batch++) {
            int base = batch * 10;
            ids.addAll(engine.insertAll(IntStream.range(base, base + 10).mapToObj(i -> JobRequest.of("twice", i))
                    .toList()).block());
        }
        for (long id : ids) {
            assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
        }
        Eventually.until("every completion seen", WAIT,
                () -> events.stream().filter(e -> e.kind() == Kind.COMPLETED).count() == jobs);
        subscription.dispose();

        Map<Long, List<Kind>> byInstance = new LinkedHashMap<>();
        events.forEach(event -> byInstance.computeIfAbsent(event.id(), id -> new ArrayList<>()).add(event.kind()));
        assertThat(byInstance).hasSize(jobs);
        byInstance.forEach((id, kinds) -> assertThat(kinds).as("events of instance %s", id).containsExactly(
                Kind.INSERTED, Kind.PICKED, Kind.STARTED, Kind.RETRIED, Kind.PICKED, Kind.STARTED, Kind.COMPLETED));
        assertThat(events).allSatisfy(event -> assertThat(event.type()).isEqualTo("twice"));
    }

    @Test
    void everyEventCarriesItsType() {
        WorkflowDefinition<String> parent = WorkflowDefinition.builder("parent", String.class).queue("typed")
                .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(
                        List.of(JobRequest.of("child", "a"), JobRequest.of("child", "b")), "joined", ctx.state())))
                .step("joined", ctx -> Mono.just(Outcome.done(ctx.children().size())))
                .build();
        WorkflowDefinition<String> waiter = WorkflowDefinition.builder("waiter", String.class).queue("typed")
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("go"), "end", ctx.state())))
                .step("end", ctx -> Mono.just(Outcome.done("ended")))
                .build();
        WorkflowDefinition<String> expiring = WorkflowDefinition.builder("expiring", String.class).queue("typed")
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("never"), "end", ctx.state(),
                        Duration.ofMillis(200))))
                .step("end", ctx -> Mono.just(Outcome.done(ctx.awaitTimedOut() ? "timed out" : "signalled")))
                .build();
        DurableEngine engine = engines.start(engines.options("typed")
                        .queue(QueueOptions.builder("typed").concurrency(4).pollInterval(Duration.ofMillis(100))
                                .build()),
                parent, waiter, expiring,
                JobDefinition.of("child", String.class, (String s) -> Mono.just(s)).queue("typed"),
                JobDefinition.of("parked", String.class, (String s) -> Mono.just(s)).queue("elsewhere"));
        List<JobEvent> events = new CopyOnWriteArrayList<>();
        Disposable subscription = engine.events().subscribe(events::add);

        long family = engine.insert(JobRequest.of("parent", "p")).block();
        long waiting = engine.insert(JobRequest.of("waiter", "w")).block();
        long expired = engine.insert(JobRequest.of("expiring", "e")).block();
        long cancelled = engine.insert(JobRequest.of("parked", "c")).block(); // its queue runs nowhere
        engine.awaitSettledOrParked(waiting, WAIT).block();
        assertThat(engine.signal(waiting, "go", "now", null).block()).isEqualTo(SignalResult.DELIVERED);
        assertThat(engine.cancel(cancelled).block()).isEqualTo(CancelResult.CANCELLED);
        for (long id : List.of(family, waiting, expired)) {
            assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.DONE);
        }
        Eventually.until("the last completion seen", WAIT, () -> events.stream()
                .filter(e -> e.kind() == Kind.COMPLETED && List.of(family, waiting, expired).contains(e.id()))
                .count() == 3);
        subscription.dispose();

        assertThat(events).allSatisfy(event -> assertThat(event.type()).as("type of %s", event).isNotNull());
        assertThat(events).anySatisfy(event -> {
            assertThat(event.kind()).isEqualTo(Kind.WOKEN);
            assertThat(event.id()).isEqualTo(family);
            assertThat(event.type()).isEqualTo("parent");
        });
        assertThat(events).filteredOn(event -> event.id() == waiting && event.kind() == Kind.SIGNALLED)
                .singleElement().extracting(JobEvent::type).isEqualTo("waiter");
        assertThat(events).filteredOn(event -> event.id() == expired && event.kind() == Kind.WOKEN)
                .singleElement().extracting(JobEvent::type).isEqualTo("expiring");
        assertThat(events).filteredOn(event -> event.id() == cancelled && event.kind() == Kind.CANCELLED)
                .singleElement().extracting(JobEvent::type).isEqualTo("parked");
        assertThat(events.stream().filter(JobEvent.ofType("waiter")).map(JobEvent::kind).toList())
                .containsExactly(Kind.INSERTED, Kind.PICKED, Kind.STARTED, Kind.PARKED, Kind.SIGNALLED, Kind.WOKEN,
                        Kind.PICKED, Kind.STARTED, Kind.COMPLETED);
    }
}
