package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.admin.Attempt;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.StepInput;
import dev.durable.support.Engines;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** Replay from a step and fork on the real database (issue 22): recorded step inputs, links, refusals, races, GC. */
@ExtendWith(PostgresExtension.class)
class ReplayIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    /** The steps a workflow ran, in order, as its state. */
    public record Trail(String path) {
        Trail then(String step) {
            return new Trail(path + ">" + step);
        }
    }

    /** Step three fails while this is set. */
    private final AtomicBoolean threeFails = new AtomicBoolean(true);
    /** The state each run of step two started with. */
    private final Queue<String> twoSaw = new ConcurrentLinkedQueue<>();

    private final WorkflowDefinition<Trail> three = WorkflowDefinition.builder("replay-three", Trail.class)
            .queue("replay").maxAttempts(1)
            .step("one", ctx -> Mono.just(Outcome.next("two", ctx.state().then("one"))))
            .step("two", ctx -> {
                twoSaw.add(ctx.state().path());
                return Mono.just(Outcome.next("three", ctx.state().then("two")));
            })
            .step("three", ctx -> Mono.just(threeFails.get() ? Outcome.fail("three failed")
                    : Outcome.done(ctx.state().then("three").path())))
            .build();

    private final AtomicInteger jobRuns = new AtomicInteger();
    /** Fails its first run, then echoes its args. */
    private final JobDefinition<String, String> flaky = JobDefinition.of("replay-job", String.class,
                    (String s) -> jobRuns.incrementAndGet() == 1 ? Mono.<String>error(new IllegalStateException("first"))
                            : Mono.just("echo " + s))
            .queue("replay").maxAttempts(1);

    /** Args that fail while they are in here. */
    private final java.util.Set<String> broken = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final JobDefinition<String, String> breakable = JobDefinition.of("replay-breakable", String.class,
                    (String s) -> broken.contains(s) ? Mono.<String>error(new IllegalStateException("broken " + s))
                            : Mono.just("fixed " + s))
            .queue("replay").maxAttempts(1);

    /** Spawns two children and joins them. */
    private final WorkflowDefinition<String> parent = WorkflowDefinition.builder("replay-parent", String.class)
            .queue("replay").maxAttempts(1)
            .step("spawn", ctx -> Mono.just(Outcome.spawnChildren(List.of(
                    JobRequest.of("replay-breakable", ctx.state() + "-a"),
                    JobRequest.of("replay-breakable", ctx.state() + "-b").runIn(Duration.ofHours(1))), "join",
                    ctx.state())))
            .step("join", ctx -> Mono.just(Outcome.done(ctx.children().size())))
            .build();

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    private EngineOptions.Builder worker(String name, String queue) {
        return engines.options(name).queue(QueueOptions.builder(queue).concurrency(4)
                .pollInterval(Duration.ofMillis(100)).maxPollInterval(Duration.ofMillis(300)).build());
    }

    private DurableEngine runner() {
        return engines.start(worker("replay-runner", "replay"), three, flaky);
    }

    private long failedAtThree(DurableEngine engine) {
        long id = engine.insert(JobRequest.of("replay-three", new Trail("start"))).block(WAIT);
        Instance failed = engines.awaitSettled(engine, id, WAIT);
        assertThat(failed.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(failed.step()).isEqualTo("three");
        return id;
    }

    private List<String> recordedSteps(long id) {
        return Sql.query(db, "SELECT step || '=' || (state->>'path') FROM {schema}.durable_step_inputs"
                + " WHERE instance_id = $1 ORDER BY step", row -> row.get(0, String.class), id);
    }

    @Test
    void replayFromStepTwoRunsTwoAndThreeAgainWithTheStateTwoRanWith() {
        DurableEngine engine = runner();
        long id = failedAtThree(engine);
        // One row per step it left; the step it failed at keeps its input on its own row.
        assertThat(recordedSteps(id)).containsExactly("one=start", "two=start>one");
        assertThat(engine.get(id).block(WAIT).state(Trail.class)).isEqualTo(new Trail("start>one>two"));

        threeFails.set(false);
        Instance back = engine.replay(id, "two").block(WAIT);
        assertThat(back.id()).isEqualTo(id);
        assertThat(back.status().isTerminal() ? "settled" : back.step()).isIn("two", "three", "settled");
        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.result(String.class)).isEqualTo("start>one>two>three");
        assertThat(done.lastError()).isNull();
        assertThat(twoSaw).containsExactly("start>one", "start>one");

        // Its history: the attempt it failed with, the replay, then the attempt it settled with now.
        InstanceDetail detail = engine.admin().detail(id).block(WAIT);
        assertThat(detail.attempts()).extracting(Attempt::outcome, Attempt::step).containsExactly(
                org.assertj.core.groups.Tuple.tuple(Attempt.Outcome.FAILED, "three"),
                org.assertj.core.groups.Tuple.tuple(Attempt.Outcome.REPLAYED, "two"),
                org.assertj.core.groups.Tuple.tuple(Attempt.Outcome.DONE, "three"));
        assertThat(detail.attempts().get(0).error()).isEqualTo("three failed");
        assertThat(detail.attempts().get(1).error()).contains("its recorded state");
        assertThat(detail.stepInputs()).extracting(StepInput::step, StepInput::current).containsExactly(
                org.assertj.core.groups.Tuple.tuple("one", false), org.assertj.core.groups.Tuple.tuple("two", false),
                org.assertj.core.groups.Tuple.tuple("three", true));
        assertThat(detail.stepInputs().get(1).stateJson()).contains("start>one");
        assertThat(detail.forkedFrom()).isNull();
        assertThat(detail.forks()).isEmpty();
    }

    @Test
    void replayWithAGivenStateStartsTheStepWithIt() {
        DurableEngine engine = runner();
        long id = failedAtThree(engine);
        threeFails.set(false);
        // Through the admin API, as the dashboard does; a step it never left still starts with a given state.
        engine.admin().replay(id, "three", new Trail("given")).block(WAIT);
        Instance done = engines.awaitSettled(engine, id, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.result(String.class)).isEqualTo("given>three");
        assertThat(twoSaw).containsExactly("start>one");
        // A done instance is replayed too.
        engine.replay(id, "one", new Trail("again")).block(WAIT);
        assertThat(engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT).result(String.class))
                .isEqualTo("again>one>two>three");
        // A state its steps cannot read is refused before anything changes.
        assertThatThrownBy(() -> engine.replay(id, "two", List.of(1, 2)).block(WAIT))
                .isInstanceOf(InvalidArgumentsException.class);
    }

    @Test
    void forkStartsANewLinkedInstanceAndLeavesTheOriginalSettled() {
        DurableEngine engine = runner();
        long id = failedAtThree(engine);
        Instance before = engine.get(id).block(WAIT);
        threeFails.set(false);

        long fork = engine.fork(id, "two").block(WAIT);
        assertThat(fork).isNotEqualTo(id);
        Instance done = engines.awaitSettled(engine, fork, WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.type()).isEqualTo("replay-three");
        assertThat(done.queue()).isEqualTo(before.queue());
        assertThat(done.result(String.class)).isEqualTo("start>one>two>three");
        assertThat(engine.get(id).block(WAIT)).isEqualTo(before);

        assertThat(engine.admin().detail(fork).block(WAIT).forkedFrom()).isEqualTo(id);
        assertThat(engine.admin().detail(fork).block(WAIT).attempts()).extracting(Attempt::outcome)
                .startsWith(Attempt.Outcome.FORKED);
        assertThat(engine.admin().detail(id).block(WAIT).forks()).containsExactly(fork);

        // A fork of a live instance, from a given state: the original goes on untouched.
        DurableEngine producer = engines.start(engines.options("replay-producer"), three);
        long live = producer.insert(JobRequest.of("replay-three", new Trail("live")).runIn(Duration.ofHours(1)))
                .block(WAIT);
        long liveFork = producer.fork(live, "one").block(WAIT);
        assertThat(engines.awaitSettled(engine, liveFork, WAIT).result(String.class))
                .isEqualTo("live>one>two>three");
        assertThat(producer.get(live).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
        long given = producer.fork(live, "three", new Trail("other")).block(WAIT);
        assertThat(engines.awaitSettled(engine, given, WAIT).result(String.class)).isEqualTo("other>three");
    }

    @Test
    void refusalsAreTypedAndChangeNothing() {
        DurableEngine engine = runner();
        long failed = failedAtThree(engine);
        DurableEngine producer = engines.start(engines.options("replay-refusals"), three);
        long live = producer.insert(JobRequest.of("replay-three", new Trail("live")).runIn(Duration.ofHours(1)))
                .block(WAIT);

        assertThatThrownBy(() -> producer.replay(live, "one").block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class, e -> {
                    assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.INSTANCE_LIVE);
                    assertThat(e.id()).isEqualTo(live);
                });
        assertThatThrownBy(() -> producer.replay(987_654_321L, "one").block(WAIT))
                .isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> producer.fork(987_654_321L, "one").block(WAIT))
                .isInstanceOf(NoTargetException.class);
        assertThatThrownBy(() -> producer.replay(failed, "four").block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.UNKNOWN_STEP));
        assertThatThrownBy(() -> producer.fork(failed, "four", new Trail("x")).block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.UNKNOWN_STEP));
        // The live one never left step one: it has no recorded input for two.
        assertThatThrownBy(() -> producer.fork(live, "two").block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.NO_RECORDED_INPUT));

        // An engine that does not know the type: recorded steps only.
        DurableEngine stranger = engines.start(engines.options("replay-stranger"));
        assertThatThrownBy(() -> stranger.replay(failed, "four", new Trail("x")).block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.UNKNOWN_STEP));

        assertThat(producer.get(failed).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(producer.get(live).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_forks WHERE forked_from IN ($1, $2)",
                row -> row.get(0, Long.class), failed, live)).containsExactly(0L);
        threeFails.set(false);
        stranger.replay(failed, "two").block(WAIT);
        assertThat(engines.awaitSettled(engine, failed, WAIT).status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void aSettledRowThatKeepsItsKeyIsReplayedInPlaceAndAKeyHeldElsewhereRefuses() {
        DurableEngine engine = engines.start(worker("replay-keys", "replay"), breakable);
        broken.add("kept");
        long kept = engine.insert(JobRequest.of("replay-breakable", "kept")
                .correlationKey("replay:kept", java.util.EnumSet.allOf(InstanceStatus.class))).block(WAIT);
        assertThat(engines.awaitSettled(engine, kept, WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        // Its key stays occupied once settled, so its row stays in the hot table.
        assertThat(Sql.count(db, "id = " + kept)).isEqualTo(1L);
        broken.remove("kept");
        engine.replay(kept, "run").block(WAIT);
        Instance done = engines.awaitStatus(engine, kept, InstanceStatus.DONE, WAIT);
        assertThat(done.result(String.class)).isEqualTo("fixed kept");
        assertThat(done.correlationKey()).isEqualTo("replay:kept");
        assertThat(engine.admin().detail(kept).block(WAIT).attempts()).extracting(Attempt::outcome)
                .containsExactly(Attempt.Outcome.FAILED, Attempt.Outcome.REPLAYED, Attempt.Outcome.DONE);

        broken.add("taken");
        long first = engine.insert(JobRequest.of("replay-breakable", "taken").correlationKey("replay:taken"))
                .block(WAIT);
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        long holder = engine.insert(JobRequest.of("replay-breakable", "holder").correlationKey("replay:taken")
                .runIn(Duration.ofHours(1))).block(WAIT);
        assertThatThrownBy(() -> engine.replay(first, "run").block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.KEY_OCCUPIED));
        assertThat(engine.get(first).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(engine.get(holder).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
    }

    @Test
    void aChildWhoseParentStillWaitsIsNotReplayedButCanBeForked() {
        DurableEngine engine = engines.start(worker("replay-family", "replay"), breakable, parent);
        broken.add("p-a");
        long id = engine.insert(JobRequest.of("replay-parent", "p")).block(WAIT);
        engines.awaitStatus(engine, id, InstanceStatus.AWAITING_CHILDREN, WAIT);
        long child = dev.durable.support.Eventually.until("child a failed", WAIT,
                        () -> Sql.query(db, "SELECT id FROM {schema}.durable_history WHERE parent_id = $1"
                                + " AND status = 'failed'", row -> row.get(0, Long.class), id),
                        ids -> !ids.isEmpty()).get(0);
        broken.remove("p-a");
        assertThatThrownBy(() -> engine.replay(child, "run").block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.PARENT_WAITS));
        long fork = engine.fork(child, "run").block(WAIT);
        Instance forked = engines.awaitSettled(engine, fork, WAIT);
        assertThat(forked.result(String.class)).isEqualTo("fixed p-a");
        assertThat(forked.parentId()).isNull();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.AWAITING_CHILDREN);
    }

    public record Cart(String customer, int cents) {
    }

    @Test
    void theReadmeExample() {
        AtomicBoolean bug = new AtomicBoolean(true);
        WorkflowDefinition<Cart> orders = WorkflowDefinition.builder("replay-order", Cart.class).queue("replay")
                .maxAttempts(1)
                .step("reserve", ctx -> Mono.just(Outcome.next("charge", ctx.state())))
                .step("charge", ctx -> Mono.just(bug.get() ? Outcome.fail("bug")
                        : Outcome.done(ctx.state().customer() + " " + ctx.state().cents())))
                .build();
        DurableEngine engine = engines.start(worker("replay-readme", "replay"), orders);
        long order = engine.insert(JobRequest.of("replay-order", new Cart("c-1", 1_000))).block(WAIT);
        assertThat(engines.awaitSettled(engine, order, WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        bug.set(false);
        // tag::replay[]
        // The order failed at "charge" after "reserve" ran: fix the bug, deploy, then run it again from
        // "reserve" with the state "reserve" last started with (same id, its history kept).
        Instance again = engine.replay(order, "reserve").block();          // runnable at "reserve"

        // Or try a step on the side: a new instance of the same type, version and queue, linked to the
        // original, starting "charge" with a state of yours (without one: the state "charge" last had).
        long trial = engine.fork(order, "charge", new Cart("c-1", 2_500)).block();
        InstanceDetail detail = engine.admin().detail(trial).block();       // detail.forkedFrom() == order
        // end::replay[]
        assertThat(again.id()).isEqualTo(order);
        assertThat(detail.forkedFrom()).isEqualTo(order);
        assertThat(engines.awaitSettled(engine, order, WAIT).result(String.class)).isEqualTo("c-1 1000");
        assertThat(engines.awaitSettled(engine, trial, WAIT).result(String.class)).isEqualTo("c-1 2500");
    }

    @Test
    void ofRacingReplaysExactlyOneWins() {
        DurableEngine first = engines.start(worker("replay-race-runner", "replay"), three, flaky);
        long id = failedAtThree(first);
        first.closeLater().block(WAIT);
        // Nobody runs the queue now: the winner's instance stays runnable while the others try.
        DurableEngine a = engines.start(engines.options("replay-race-a"), three);
        DurableEngine b = engines.start(engines.options("replay-race-b"), three);
        List<Object> outcomes = Flux.range(0, 12)
                .flatMap(i -> (i % 2 == 0 ? a : b).replay(id, i % 3 == 0 ? "one" : "two")
                        .<Object>map(Instance::step)
                        .onErrorResume(ReplayRefusedException.class, e -> Mono.just(e.reason()))
                        .subscribeOn(Schedulers.parallel()), 12)
                .collectList().block(WAIT);
        assertThat(outcomes).hasSize(12);
        assertThat(outcomes.stream().filter(o -> o instanceof String)).hasSize(1);
        assertThat(outcomes.stream().filter(o -> o == ReplayRefusedException.Reason.INSTANCE_LIVE)).hasSize(11);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_attempts WHERE instance_id = $1"
                + " AND outcome = 'replayed'", row -> row.get(0, Long.class), id)).containsExactly(1L);
        assertThat(a.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_history WHERE id = $1",
                row -> row.get(0, Long.class), id)).containsExactly(0L);
    }

    @Test
    void aPlainJobIsReplayedWithItsArgsAndRecordsNoStepInput() {
        DurableEngine engine = runner();
        long id = engine.insert(JobRequest.of("replay-job", "hello")).block(WAIT);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        Instance back = engine.replay(id, JobDefinition.STEP).block(WAIT);
        assertThat(back.id()).isEqualTo(id);
        Instance done = engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(done.result(String.class)).isEqualTo("echo hello");
        // Again, with other args.
        engine.replay(id, "run", "world").block(WAIT);
        Instance again = engines.awaitStatus(engine, id, InstanceStatus.DONE, WAIT);
        assertThat(again.result(String.class)).isEqualTo("echo world");
        assertThat(engine.admin().detail(id).block(WAIT).stepInputs()).extracting(StepInput::step, StepInput::current)
                .containsExactly(org.assertj.core.groups.Tuple.tuple("run", true));
        // Jobs never write a step input, retried or not.
        List<Long> more = IntStream.range(0, 20).mapToObj(i -> engine.insert(JobRequest.of("replay-job", "j" + i)))
                .map(m -> m.block(WAIT)).toList();
        more.forEach(job -> engines.awaitSettled(engine, job, WAIT));
        List<Long> jobs = new java.util.ArrayList<>(more);
        jobs.add(id);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_step_inputs WHERE instance_id = ANY ($1)",
                row -> row.get(0, Long.class), (Object) jobs.toArray(Long[]::new))).containsExactly(0L);
        assertThatThrownBy(() -> engine.replay(id, "two").block(WAIT))
                .isInstanceOfSatisfying(ReplayRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(ReplayRefusedException.Reason.UNKNOWN_STEP));
    }

    @Test
    void garbageCollectionPrunesTheRecordedInputsAndForkLinksWithTheInstance() {
        DurableEngine engine = engines.start(worker("replay-gc", "replay").runMaintenance(false)
                .retention(Duration.ofHours(1)), three, flaky);
        long old = failedAtThree(engine);
        long kept = failedAtThree(engine);
        threeFails.set(false);
        long fork = engine.fork(old, "two").block(WAIT);
        engines.awaitSettled(engine, fork, WAIT);
        assertThat(recordedSteps(old)).hasSize(2);
        assertThat(recordedSteps(fork)).containsExactly("two=start>one");
        db.execute("UPDATE \"" + db.schema() + "\".durable_history SET settled_at = now() - interval '2 hours'"
                + " WHERE id IN (" + old + ", " + fork + ")");

        assertThat(engine.maintenance().orElseThrow().collectGarbage().block(WAIT)).isEqualTo(2L);
        assertThat(recordedSteps(old)).isEmpty();
        assertThat(recordedSteps(fork)).isEmpty();
        assertThat(recordedSteps(kept)).hasSize(2);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_forks WHERE id = $1 OR forked_from = $2",
                row -> row.get(0, Long.class), fork, old)).containsExactly(0L);
        // The admin's delete prunes them too.
        engine.admin().delete(kept).block(WAIT);
        assertThat(recordedSteps(kept)).isEmpty();
    }
}
