package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.JobEvent.Kind;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.tck.TestObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistryAssert;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.reactivestreams.Subscription;
import reactor.core.Disposable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class ObservabilityIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    @Test
    void eventsMetersAndObservationsFollowEachRun() {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        TestObservationRegistry observations = TestObservationRegistry.create();
        AtomicInteger calls = new AtomicInteger();
        JobDefinition<String, String> flaky = JobDefinition.of("flaky", String.class,
                        (String s) -> calls.incrementAndGet() == 1 ? Mono.error(new IllegalStateException("first"))
                                : Mono.just("ok"))
                .queue("observed").backoff(Backoff.fixed(Duration.ofMillis(10)));
        WorkflowDefinition<String> waiter = WorkflowDefinition.builder("waiter", String.class).queue("observed")
                .step("park", ctx -> Mono.just(Outcome.await(Set.of("go"), "end", ctx.state())))
                .step("end", ctx -> Mono.just(Outcome.done("ended")))
                .build();
        DurableEngine engine = engines.start(engines.options("observed")
                        .meterRegistry(meters).observationRegistry(observations)
                        .queue(QueueOptions.builder("observed").concurrency(3).prefetch(2)
                                .pollInterval(Duration.ofMillis(100)).build()),
                flaky, waiter);
        List<JobEvent> events = new CopyOnWriteArrayList<>();
        Disposable subscription = engine.events().filter(JobEvent.ofQueue("observed")).subscribe(events::add);

        long job = engine.insert(JobRequest.of("flaky", "x")).block();
        long workflow = engine.insert(JobRequest.of("waiter", "w")).block();
        engine.awaitSettled(job, WAIT).block();
        engine.awaitSettledOrParked(workflow, WAIT).block();
        // The status reads parked once the park committed, a moment before its run says PARKED (after
        // the commit's answer): the signal goes after the event, so the order below is what happened.
        Eventually.until("parked event seen", WAIT, () -> events.stream()
                .anyMatch(e -> e.id() == workflow && e.kind() == Kind.PARKED));
        engine.signal(workflow, "go", null, null).block();
        engine.awaitSettled(workflow, WAIT).block();
        Eventually.until("last event seen", WAIT, () -> events.stream()
                .anyMatch(e -> e.id() == workflow && e.kind() == Kind.COMPLETED));
        subscription.dispose();

        // Events of one instance come from several threads (the insert's caller, picks, runs), in
        // the order of what happened to it: a re-pick is never reported before the retry.
        assertThat(kinds(events, job)).containsExactly(Kind.INSERTED, Kind.PICKED, Kind.STARTED, Kind.RETRIED,
                Kind.PICKED, Kind.STARTED, Kind.COMPLETED);
        assertThat(kinds(events, workflow)).containsExactly(Kind.INSERTED, Kind.PICKED, Kind.STARTED, Kind.PARKED,
                Kind.SIGNALLED, Kind.WOKEN, Kind.PICKED, Kind.STARTED, Kind.COMPLETED);
        assertThat(events).allSatisfy(event -> assertThat(event.type()).as("type of %s", event).isNotNull());
        JobEvent retried = events.stream().filter(e -> e.id() == job && e.kind() == Kind.RETRIED).findFirst().orElseThrow();
        assertThat(retried.error()).contains("first");
        assertThat(retried.duration()).isNotNull();
        assertThat(retried.type()).isEqualTo("flaky");

        assertThat(meters.get("durable.outcomes").tags("queue", "observed", "type", "flaky", "outcome", "completed")
                .counter().count()).isEqualTo(1);
        assertThat(meters.get("durable.outcomes").tags("type", "flaky", "outcome", "retried").counter().count()).isEqualTo(1);
        assertThat(meters.get("durable.run").tags("type", "waiter").timers()).hasSize(2); // parked, completed
        assertThat(meters.get("durable.inserted").tags("queue", "observed").counters()).hasSize(2);
        // What a pick was triggered by depends on timing (the poll may beat the poke to a row): the
        // meters are checked for their tags and sum, the pokes for having been heard, not for what won.
        assertThat(meters.get("durable.picks").tags("queue", "observed").functionCounters())
                .extracting(counter -> counter.getId().getTag("trigger"))
                .containsExactlyInAnyOrderElementsOf(java.util.Arrays.stream(PickTrigger.values())
                        .map(trigger -> trigger.name().toLowerCase(java.util.Locale.ROOT)).toList());
        assertThat(meters.get("durable.picks").tags("queue", "observed").functionCounters().stream()
                .mapToDouble(io.micrometer.core.instrument.FunctionCounter::count).sum()).isGreaterThanOrEqualTo(2);
        assertThat(meters.get("durable.pokes").tags("queue", "observed", "result", "handled").functionCounter()
                .count()).as("the inserts and the signal poked the queue").isPositive();
        assertThat(meters.get("durable.scheduler.concurrency").tags("queue", "observed").gauge().value()).isEqualTo(3);
        assertThat(meters.get("durable.scheduler.prefetch").tags("queue", "observed").gauge().value()).isEqualTo(2);
        assertThat(meters.get("durable.scheduler.running").gauge().value()).isZero();
        assertThat(meters.get("durable.pick.size").tags("queue", "observed").summary().count()).isPositive();
        // Bounded tags: no instance ids among the meters.
        assertThat(meters.getMeters()).allSatisfy(meter -> assertThat(meter.getId().getTags())
                .noneMatch(tag -> tag.getValue().equals(Long.toString(job))));

        TestObservationRegistryAssert.assertThat(observations)
                .hasObservationWithNameEqualTo("durable.step")
                .that()
                .hasContextualNameEqualTo("flaky run")
                .hasLowCardinalityKeyValue("durable.queue", "observed")
                .hasHighCardinalityKeyValue("durable.instance.id", Long.toString(job))
                .hasBeenStarted()
                .hasBeenStopped();
        TestObservationRegistryAssert.assertThat(observations)
                .hasNumberOfObservationsWithNameEqualTo("durable.step", 4);
    }

    private static List<Kind> kinds(List<JobEvent> events, long id) {
        return events.stream().filter(e -> e.id() == id).map(JobEvent::kind).toList();
    }

    @Test
    void aSubscriberThatNeverRequestsNeitherSlowsPicksNorGrowsMemory() {
        DurableEngine engine = engines.start(engines.options("stalled").eventBufferSize(16)
                        .queue(QueueOptions.builder("stalled").concurrency(20).prefetch(20)
                                .pollInterval(Duration.ofMillis(100)).build()),
                JobDefinition.of("noop", String.class, (String s) -> Mono.just(s)).queue("stalled"));
        AtomicInteger received = new AtomicInteger();
        BaseSubscriber<JobEvent> stalled = new BaseSubscriber<>() {
            @Override
            protected void hookOnSubscribe(Subscription subscription) {
                // never requests
            }

            @Override
            protected void hookOnNext(JobEvent value) {
                received.incrementAndGet();
            }
        };
        engine.events().subscribe(stalled);
        List<JobRequest> requests = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            requests.add(JobRequest.of("noop", "n" + i));
        }
        engine.insertAll(requests).block();
        Eventually.until("all done despite the stalled subscriber", WAIT,
                () -> Sql.count(db, "queue = 'stalled' AND status = 'done'") == 1000);
        assertThat(received.get()).isZero();
        // Inserted, picked, started and completed went by for each job; the subscriber's buffer kept 16.
        // A job's completion is published once its commit has answered, a moment after another
        // connection already counts its row done: the last few may still be on their way.
        long dropped = Eventually.until("every job's four events published", WAIT, engine::eventsDropped,
                count -> count >= 4 * 1000 - 16);
        assertThat(dropped).isEqualTo(4 * 1000 - 16);
        stalled.request(100);
        assertThat(received.get()).isEqualTo(16);
        stalled.dispose();
    }
}
