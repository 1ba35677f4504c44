package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.InsertResult.Disposition;
import dev.durable.support.CountingConnectionFactory;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.ForAll;
import dev.durable.support.Gen;
import dev.durable.support.Gens;
import dev.durable.support.Sql;
import dev.durable.testing.DurableTesting;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestClock;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/** Issue 21: an insert with a correlation key under a conflict policy (reject, skip, replace, debounce). */
@ExtendWith(PostgresExtension.class)
class ConflictPolicyIT {

    private static final Duration WAIT = Duration.ofMinutes(1);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    /** An engine that inserts and runs nothing: holders stay runnable. */
    private DurableEngine producer(String name, CountingConnectionFactory counting) {
        EngineOptions.Builder options = engines.options(name);
        if (counting != null) {
            options.connectionFactory(counting);
        }
        DurableEngine engine = engines.build(options,
                JobDefinition.of("echo", String.class, (String s) -> Mono.just(s)).queue("policies"));
        engine.migrate().block(WAIT);
        return engine;
    }

    private static JobRequest keyed(String key, String args) {
        return JobRequest.of("echo", args).correlationKey(key).runIn(Duration.ofHours(1));
    }

    /** Rows of the hot table (live instances, and follow-ups waiting on them) matching {@code where}. */
    private long hot(String where) {
        return Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE " + where,
                row -> row.get(0, Long.class)).get(0);
    }

    private String state(DurableEngine engine, long id) {
        return engine.codec().decode(engine.get(id).block(WAIT).stateJson(), String.class);
    }

    @Test
    void brokenCombinationsAreTypedErrors() {
        DurableEngine engine = producer("broken", null);
        long before = Sql.count(db, "true");
        assertThatThrownBy(() -> ConflictPolicy.debounce(Duration.ZERO)).isInstanceOf(InvalidRequestException.class)
                .hasMessageContaining("window must be positive");
        assertThatThrownBy(() -> ConflictPolicy.debounce(Duration.ofSeconds(-1)))
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> ConflictPolicy.debounce(Duration.ofSeconds(10), Duration.ofSeconds(5)))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("maxWait must be at least the window");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("echo", "x").onConflict(ConflictPolicy.replace()))
                .block(WAIT)).isInstanceOf(InvalidRequestException.class).hasMessageContaining("needs a correlation key");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("echo", "x").correlationKey("k")
                        .onConflict(ConflictPolicy.debounce(Duration.ofSeconds(1))).runIn(Duration.ofSeconds(5)))
                .block(WAIT)).isInstanceOf(InvalidRequestException.class).hasMessageContaining("runAt and runIn");
        assertThatThrownBy(() -> engine.insert(JobRequest.of("echo", "x").correlationKey("k").onConflict(null))
                .block(WAIT)).isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> engine.insertAll(List.of(keyed("twice", "a").onConflict(ConflictPolicy.replace()),
                keyed("twice", "b").onConflict(ConflictPolicy.skip()))).block(WAIT))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("comes twice");
        assertThat(Sql.count(db, "true")).as("nothing inserted").isEqualTo(before);
    }

    @Test
    void eachPolicyAgainstAnUnstartedHolderInOneStatement() {
        CountingConnectionFactory counting = new CountingConnectionFactory(db.connectionFactory());
        DurableEngine engine = producer("unstarted", counting);

        engine.insert(JobRequest.of("echo", "warm-up")).block(WAIT); // the first insert also reads the registry
        counting.reset();
        long holder = engine.insert(keyed("k", "first")).block(WAIT);
        assertThat(counting.count(sql -> true)).as("a plain insert's statements").isEqualTo(1);

        // reject (the default)
        assertThatThrownBy(() -> engine.insert(keyed("k", "again")).block(WAIT))
                .isInstanceOf(DuplicateCorrelationKeyException.class);

        // skip
        counting.reset();
        assertThat(engine.insertWithResult(keyed("k", "skipped").onConflict(ConflictPolicy.skip())).block(WAIT))
                .isEqualTo(new InsertResult(holder, Disposition.SKIPPED));
        assertThat(counting.count(sql -> true)).as("a policy insert's statements").isEqualTo(1);
        assertThat(state(engine, holder)).isEqualTo("first");
        // insertAsync sends a request under a policy in its own statement, not with the buffer's.
        assertThat(engine.insertAsync(keyed("k", "async").onConflict(ConflictPolicy.skip())).block(WAIT))
                .isEqualTo(holder);

        // replace: arguments, priority and run-at of the holder
        Instant runAt = Instant.now().plus(Duration.ofDays(2));
        counting.reset();
        InsertResult replaced = engine.insertWithResult(JobRequest.of("echo", "second").correlationKey("k")
                .priority(-5).runAt(runAt).onConflict(ConflictPolicy.replace())).block(WAIT);
        assertThat(counting.count(sql -> true)).isEqualTo(1);
        assertThat(replaced).isEqualTo(new InsertResult(holder, Disposition.REPLACED));
        Instance after = engine.get(holder).block(WAIT);
        assertThat(engine.codec().decode(after.stateJson(), String.class)).isEqualTo("second");
        assertThat(after.priority()).isEqualTo(-5);
        assertThat(after.eligibleAt()).isCloseTo(runAt, org.assertj.core.api.Assertions.within(
                1, java.time.temporal.ChronoUnit.MILLIS));

        // debounce against an unstarted holder: its arguments, and the run time moves to the window's end
        InsertResult debounced = engine.insertWithResult(JobRequest.of("echo", "third").correlationKey("k")
                .onConflict(ConflictPolicy.debounce(Duration.ofMinutes(10)))).block(WAIT);
        assertThat(debounced).isEqualTo(new InsertResult(holder, Disposition.REPLACED));
        assertThat(state(engine, holder)).isEqualTo("third");
        assertThat(engine.get(holder).block(WAIT).eligibleAt()).isBefore(runAt);

        // A request on a free key is inserted under any policy; a batch mixes them in one statement.
        counting.reset();
        List<InsertResult> batch = engine.insertAll(List.of(keyed("k", "fourth").onConflict(ConflictPolicy.replace()),
                JobRequest.of("echo", "new").correlationKey("free").onConflict(ConflictPolicy.debounce(Duration.ofMinutes(1))),
                keyed("other", "plain"), JobRequest.of("echo", "no key")), InsertMode.REJECT_DUPLICATES).block(WAIT);
        assertThat(counting.count(sql -> true)).isEqualTo(1);
        assertThat(batch).extracting(InsertResult::disposition).containsExactly(Disposition.REPLACED,
                Disposition.INSERTED, Disposition.INSERTED, Disposition.INSERTED);
        assertThat(batch.get(0).id()).isEqualTo(holder);
        assertThat(state(engine, holder)).isEqualTo("fourth");
        assertThat(state(engine, batch.get(1).id())).isEqualTo("new");
        // A batch under SKIP_DUPLICATES with a replace in it: the requests without a policy skip.
        List<InsertResult> skipping = engine.insertAll(List.of(keyed("other", "skipped"),
                keyed("free", "newest").onConflict(ConflictPolicy.replace())), InsertMode.SKIP_DUPLICATES).block(WAIT);
        assertThat(skipping).containsExactly(new InsertResult(batch.get(2).id(), Disposition.SKIPPED),
                new InsertResult(batch.get(1).id(), Disposition.REPLACED));
        assertThat(state(engine, batch.get(2).id())).isEqualTo("plain");
        assertThat(state(engine, batch.get(1).id())).isEqualTo("newest");
        for (String key : List.of("k", "free", "other")) {
            assertThat(Sql.count(db, "correlation_key = '" + key + "'")).as(key).isEqualTo(1);
        }

        // A reject in a policy batch still fails the whole batch.
        long before = Sql.count(db, "true");
        assertThatThrownBy(() -> engine.insertAll(List.of(keyed("k", "x").onConflict(ConflictPolicy.replace()),
                keyed("other", "y"))).block(WAIT)).isInstanceOf(DuplicateCorrelationKeyException.class);
        assertThat(Sql.count(db, "true")).isEqualTo(before);
        assertThat(state(engine, holder)).isEqualTo("fourth");
    }

    @Test
    void replacingAnExecutingHolderKeepsOneFollowUpWithTheNewestArgsThatRunsAfterIt() {
        List<String> ran = new CopyOnWriteArrayList<>();
        Sinks.Empty<Void> release = Sinks.empty();
        Sinks.Empty<Void> hold = Sinks.empty();
        JobDefinition<String, String> slow = JobDefinition.of("slow", String.class, (String s) -> {
            ran.add(s);
            return s.equals("first") ? release.asMono().thenReturn(s)
                    : s.equals("hold") ? hold.asMono().thenReturn(s) : Mono.just(s);
        }).queue("follow");
        DurableEngine engine = engines.start(engines.options("follower")
                .queue(QueueOptions.builder("follow").pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(200)).build()), slow);
        long first = engine.insert(JobRequest.of("slow", "first").correlationKey("job")).block(WAIT);
        engines.awaitStatus(engine, first, InstanceStatus.EXECUTING, WAIT);

        InsertResult second = engine.insertWithResult(JobRequest.of("slow", "second").correlationKey("job")
                .onConflict(ConflictPolicy.replace())).block(WAIT);
        InsertResult third = engine.insertWithResult(JobRequest.of("slow", "third").correlationKey("job")
                .onConflict(ConflictPolicy.replace())).block(WAIT);
        assertThat(second.disposition()).isEqualTo(Disposition.FOLLOW_UP);
        assertThat(third).as("one follow-up, newest args").isEqualTo(second);
        assertThat(second.id()).isNotEqualTo(first);
        assertThat(engine.get(second.id()).blockOptional(WAIT)).as("not inserted before the holder settles").isEmpty();
        assertThat(engine.get(first).block(WAIT).status()).isEqualTo(InstanceStatus.EXECUTING);
        assertThat(ran).containsExactly("first");

        release.tryEmitEmpty();
        assertThat(engines.awaitSettled(engine, first, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        Instance followUp = engines.awaitSettled(engine, second.id(), WAIT);
        assertThat(followUp.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(engine.codec().decode(followUp.resultJson(), String.class)).isEqualTo("third");
        assertThat(followUp.correlationKey()).isEqualTo("job");
        assertThat(ran).containsExactly("first", "third");
        assertThat(hot("correlation_key = 'job'")).as("the hot table holds none of the key again").isZero();

        // Skip against an executing holder leaves it alone and queues nothing.
        long busy = engine.insert(JobRequest.of("slow", "hold").correlationKey("busy")).block(WAIT);
        engines.awaitStatus(engine, busy, InstanceStatus.EXECUTING, WAIT);
        assertThat(engine.insertWithResult(JobRequest.of("slow", "later").correlationKey("busy")
                .onConflict(ConflictPolicy.skip())).block(WAIT)).isEqualTo(new InsertResult(busy, Disposition.SKIPPED));
        assertThat(hot("follow_up IS NOT NULL")).isZero();

        // Debounce against an executing holder: the follow-up waits for the window after the holder settles.
        InsertResult debounced = engine.insertWithResult(JobRequest.of("slow", "debounced").correlationKey("busy")
                .onConflict(ConflictPolicy.debounce(Duration.ofMinutes(10)))).block(WAIT);
        assertThat(debounced.disposition()).isEqualTo(Disposition.FOLLOW_UP);
        assertThat(hot("correlation_key = 'busy' AND (follow_up->>'eligible_at')::timestamptz"
                + " > now() + interval '9 minutes'")).isEqualTo(1);
        hold.tryEmitEmpty();
        assertThat(engines.awaitSettled(engine, busy, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        Instance waiting = Eventually.until("the debounced follow-up inserted", WAIT,
                () -> engine.get(debounced.id()).blockOptional(WAIT).orElse(null), i -> i != null);
        assertThat(waiting.status()).isEqualTo(InstanceStatus.RUNNABLE);
        assertThat(engine.codec().decode(waiting.stateJson(), String.class)).isEqualTo("debounced");
        assertThat(ran).doesNotContain("debounced");
        assertThat(engine.cancel(debounced.id()).block(WAIT)).isEqualTo(CancelResult.CANCELLED);
    }

    @Test
    void debounceRunsOnceTheKeyIsQuietForTheWindowOrAtMaxWaitWithTheNewestArgs() {
        TestClock clock = TestClock.on(db);
        List<String> ran = new CopyOnWriteArrayList<>();
        JobDefinition<String, String> index = JobDefinition.of("index", String.class, (String s) -> {
            ran.add(s);
            return Mono.just(s);
        }).queue("debounce");
        DurableEngine engine = engines.start(clock.engineOptions().name("debouncer")
                .queue(QueueOptions.builder("debounce").pollInterval(Duration.ofMillis(50)).build()), index);
        ConflictPolicy policy = ConflictPolicy.debounce(Duration.ofMinutes(10), Duration.ofMinutes(30));

        // Quiet window: inserts 4 minutes apart keep pushing the run; 10 quiet minutes let it run.
        long id = engine.insertWithResult(JobRequest.of("index", "a").correlationKey("quiet").onConflict(policy))
                .block(WAIT).id();
        for (String args : List.of("b", "c")) {
            clock.advance(Duration.ofMinutes(4));
            DurableTesting.drain(engine);
            assertThat(engine.insertWithResult(JobRequest.of("index", args).correlationKey("quiet").onConflict(policy))
                    .block(WAIT)).isEqualTo(new InsertResult(id, Disposition.REPLACED));
        }
        clock.advance(Duration.ofMinutes(9));
        DurableTesting.drain(engine);
        assertThat(ran).isEmpty();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
        clock.advance(Duration.ofMinutes(2));
        DurableTesting.drain(engine);
        assertThat(engines.awaitSettled(engine, id, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(ran).containsExactly("c");

        // maxWait: inserts every 8 minutes never leave 10 quiet ones; it runs 30 minutes after the first.
        ran.clear();
        long bounded = engine.insertWithResult(JobRequest.of("index", "0").correlationKey("busy").onConflict(policy))
                .block(WAIT).id();
        for (int minute = 8; minute <= 24; minute += 8) {
            clock.advance(Duration.ofMinutes(8));
            DurableTesting.drain(engine);
            assertThat(ran).as("at minute " + minute).isEmpty();
            assertThat(engine.insertWithResult(JobRequest.of("index", String.valueOf(minute)).correlationKey("busy")
                    .onConflict(policy)).block(WAIT)).isEqualTo(new InsertResult(bounded, Disposition.REPLACED));
        }
        clock.advance(Duration.ofMinutes(5)); // minute 29: the last insert's window ends at 34, maxWait at 30
        DurableTesting.drain(engine);
        assertThat(ran).isEmpty();
        clock.advance(Duration.ofMinutes(2)); // minute 31
        DurableTesting.drain(engine);
        assertThat(engines.awaitSettled(engine, bounded, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        assertThat(ran).containsExactly("24");
    }

    @Test
    void concurrentInsertsOfOneKeyFromTwoEnginesLeaveOneHolderAndAnswerEach() {
        DurableEngine a = producer("left", null);
        DurableEngine b = producer("right", null);
        int keys = 20;
        int perKey = 12;
        List<ConflictPolicy> policies = List.of(ConflictPolicy.replace(), ConflictPolicy.skip(),
                ConflictPolicy.debounce(Duration.ofMinutes(5), Duration.ofMinutes(20)));
        Map<String, List<InsertResult>> answers = new ConcurrentHashMap<>();
        Flux.range(0, keys * perKey)
                .flatMap(n -> {
                    String key = "race-" + (n % keys);
                    DurableEngine engine = n % 2 == 0 ? a : b;
                    ConflictPolicy policy = policies.get((n / keys) % policies.size());
                    JobRequest request = JobRequest.of("echo", key + "#" + n).correlationKey(key).onConflict(policy);
                    return Mono.defer(() -> engine.insertWithResult(policy.kind() == ConflictPolicy.Kind.DEBOUNCE
                                    ? request : request.runIn(Duration.ofHours(1))))
                            .doOnNext(result -> answers.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>())
                                    .add(result))
                            .subscribeOn(Schedulers.parallel());
                }, 16)
                .blockLast(Duration.ofMinutes(3));
        for (int k = 0; k < keys; k++) {
            String key = "race-" + k;
            List<Long> holders = Sql.query(db, "SELECT id FROM {schema}.durable_instances WHERE correlation_key = '"
                    + key + "'", row -> row.get(0, Long.class));
            assertThat(holders).as(key).hasSize(1);
            List<InsertResult> results = answers.get(key);
            assertThat(results).as(key).hasSize(perKey);
            assertThat(results.stream().filter(InsertResult::created).count()).as(key + " inserted once").isEqualTo(1);
            assertThat(results).as(key + " all name the holder").allMatch(r -> r.id() == holders.get(0));
            assertThat(state(a, holders.get(0))).startsWith(key + "#");
        }
        assertThat(hot("follow_up IS NOT NULL AND correlation_key LIKE 'race-%'")).as("nothing started, nothing follows")
                .isZero();
    }

    @Test
    void racingReplacesOfExecutingHoldersFromTwoEnginesQueueExactlyOneFollowUpEach() {
        Map<String, List<String>> ran = new ConcurrentHashMap<>();
        Sinks.Empty<Void> release = Sinks.empty();
        JobDefinition<String, String> held = JobDefinition.of("held", String.class, (String s) -> {
            ran.computeIfAbsent(s.substring(0, s.indexOf('#')), k -> new CopyOnWriteArrayList<>()).add(s);
            return s.endsWith("#first") ? release.asMono().thenReturn(s) : Mono.just(s);
        }).queue("racing");
        DurableEngine runner = engines.start(engines.options("runner")
                .queue(QueueOptions.builder("racing").concurrency(10).pollInterval(Duration.ofMillis(50))
                        .maxPollInterval(Duration.ofMillis(200)).build()), held);
        DurableEngine other = engines.build(engines.options("other"), held);
        other.migrate().block(WAIT);
        int keys = 8;
        int perKey = 10;
        Map<String, Long> holders = new java.util.HashMap<>();
        for (int k = 0; k < keys; k++) {
            String key = "busy-" + k;
            holders.put(key, runner.insert(JobRequest.of("held", key + "#first").correlationKey(key)).block(WAIT));
        }
        holders.values().forEach(id -> engines.awaitStatus(runner, id, InstanceStatus.EXECUTING, WAIT));

        Map<String, List<InsertResult>> answers = new ConcurrentHashMap<>();
        Flux.range(0, keys * perKey)
                .flatMap(n -> {
                    String key = "busy-" + (n % keys);
                    DurableEngine engine = n % 2 == 0 ? runner : other;
                    return Mono.defer(() -> engine.insertWithResult(JobRequest.of("held", key + "#" + n)
                                    .correlationKey(key).onConflict(ConflictPolicy.replace())))
                            .doOnNext(result -> answers.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>())
                                    .add(result))
                            .subscribeOn(Schedulers.parallel());
                }, 16)
                .blockLast(Duration.ofMinutes(3));
        for (String key : holders.keySet()) {
            List<InsertResult> results = answers.get(key);
            assertThat(results).as(key).hasSize(perKey).allMatch(r -> r.disposition() == Disposition.FOLLOW_UP);
            assertThat(results.stream().map(InsertResult::id).distinct().count()).as(key + ": one follow-up").isEqualTo(1);
            assertThat(hot("correlation_key = '" + key + "'")).as(key).isEqualTo(1);
        }

        release.tryEmitEmpty();
        for (String key : holders.keySet()) {
            long followUp = answers.get(key).get(0).id();
            assertThat(engines.awaitSettled(runner, holders.get(key), WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(engines.awaitSettled(runner, followUp, WAIT).status()).isEqualTo(InstanceStatus.DONE);
        }
        for (String key : holders.keySet()) {
            assertThat(ran.get(key)).as(key + ": the holder, then one follow-up").hasSize(2)
                    .first().isEqualTo(key + "#first");
            assertThat(hot("correlation_key = '" + key + "'")).isZero();
        }
    }

    @Test
    void aPolicyInsertInACallersTransactionIsUndoneWithIt() {
        DurableEngine engine = producer("transactional", null);
        long holder = engine.insert(keyed("tx", "kept")).block(WAIT);
        for (boolean commit : new boolean[] {false, true}) {
            io.r2dbc.spi.Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
            try {
                Mono.from(connection.beginTransaction()).block(WAIT);
                List<Long> ids = engine.insertAll(connection, List.of(keyed("tx", "changed-" + commit)
                        .onConflict(ConflictPolicy.replace()), keyed("tx-new-" + commit, "new")
                        .onConflict(ConflictPolicy.skip()))).block(WAIT);
                assertThat(ids.get(0)).isEqualTo(holder);
                Mono.from(commit ? connection.commitTransaction() : connection.rollbackTransaction()).block(WAIT);
                assertThat(state(engine, holder)).isEqualTo(commit ? "changed-true" : "kept");
                assertThat(hot("correlation_key = 'tx-new-" + commit + "'")).isEqualTo(commit ? 1 : 0);
            } finally {
                Mono.from(connection.close()).block(WAIT);
            }
        }
    }

    /** One step of the property below: an insert of a key under a policy, or a cancel of its holder. */
    enum Action {
        REJECT, SKIP, REPLACE, DEBOUNCE, CANCEL
    }

    record Step(int key, Action action, int args, boolean withPrevious) {
    }

    /**
     * Against holders that never start (nothing runs them), any sequence of policy inserts, single
     * or in batches, and cancels agrees with a model of one live instance per key: reject fails its
     * whole batch on a live key, skip names the holder, replace and debounce give it the newest
     * arguments, a free key is inserted; and each key has at most one live row.
     */
    @Test
    void policyInsertsAgreeWithAModelOfOneLiveInstancePerKey() {
        DurableEngine engine = producer("model", null);
        java.util.concurrent.atomic.AtomicInteger tries = new java.util.concurrent.atomic.AtomicInteger();
        Gen<Step> steps = draw -> new Step(Gens.ints(0, 3).next(draw), Gens.enums(Action.class).next(draw),
                Gens.ints(0, 999).next(draw), Gens.booleans().next(draw));
        ForAll.check("policyInsertsAgreeWithAModelOfOneLiveInstancePerKey", 25, Gens.lists(steps, 1, 16), list -> {
            String prefix = "m" + tries.incrementAndGet() + "-";
            Map<Integer, Long> ids = new java.util.HashMap<>();
            Map<Integer, String> args = new java.util.HashMap<>();
            int at = 0;
            while (at < list.size()) {
                Step first = list.get(at);
                if (first.action() == Action.CANCEL) {
                    Long id = ids.remove(first.key());
                    args.remove(first.key());
                    if (id != null) {
                        assertThat(engine.cancel(id).block(WAIT)).isEqualTo(CancelResult.CANCELLED);
                    }
                    at++;
                    continue;
                }
                // A batch: this step and the following ones marked withPrevious, while keys stay distinct.
                List<Step> batch = new java.util.ArrayList<>(List.of(first));
                Set<Integer> keys = new java.util.HashSet<>(Set.of(first.key()));
                while (at + batch.size() < list.size()) {
                    Step next = list.get(at + batch.size());
                    if (!next.withPrevious() || next.action() == Action.CANCEL || !keys.add(next.key())) {
                        break;
                    }
                    batch.add(next);
                }
                at += batch.size();
                List<JobRequest> requests = batch.stream().map(step -> request(prefix, step)).toList();
                boolean refused = batch.stream().anyMatch(step -> step.action() == Action.REJECT
                        && ids.containsKey(step.key()));
                if (refused) {
                    assertThatThrownBy(() -> engine.insertAll(requests, InsertMode.REJECT_DUPLICATES).block(WAIT))
                            .isInstanceOf(DuplicateCorrelationKeyException.class);
                } else {
                    List<InsertResult> results = engine.insertAll(requests, InsertMode.REJECT_DUPLICATES).block(WAIT);
                    for (int i = 0; i < batch.size(); i++) {
                        Step step = batch.get(i);
                        InsertResult result = results.get(i);
                        Long holder = ids.get(step.key());
                        if (holder == null) {
                            assertThat(result.disposition()).as(step.toString()).isEqualTo(Disposition.INSERTED);
                            ids.put(step.key(), result.id());
                            args.put(step.key(), String.valueOf(step.args()));
                        } else if (step.action() == Action.SKIP) {
                            assertThat(result).as(step.toString()).isEqualTo(new InsertResult(holder, Disposition.SKIPPED));
                        } else {
                            assertThat(result).as(step.toString()).isEqualTo(new InsertResult(holder, Disposition.REPLACED));
                            args.put(step.key(), String.valueOf(step.args()));
                        }
                    }
                }
                for (int key = 0; key <= 3; key++) {
                    assertThat(hot("correlation_key = '" + prefix + key + "'")).as("live rows of key " + key)
                            .isEqualTo(ids.containsKey(key) ? 1 : 0);
                    if (ids.containsKey(key)) {
                        assertThat(state(engine, ids.get(key))).as("arguments of key " + key).isEqualTo(args.get(key));
                    }
                }
            }
        });
    }

    private static JobRequest request(String prefix, Step step) {
        JobRequest request = JobRequest.of("echo", String.valueOf(step.args())).correlationKey(prefix + step.key());
        return switch (step.action()) {
            case SKIP -> request.runIn(Duration.ofHours(1)).onConflict(ConflictPolicy.skip());
            case REPLACE -> request.runIn(Duration.ofHours(1)).onConflict(ConflictPolicy.replace());
            case DEBOUNCE -> request.onConflict(ConflictPolicy.debounce(Duration.ofMinutes(10), Duration.ofHours(1)));
            default -> request.runIn(Duration.ofHours(1));
        };
    }
}
