package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.internal.Db;
import dev.durable.internal.sql.FairPickSql;
import dev.durable.internal.sql.PickSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Tables;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Fair share across the keys of a queue, on the real database: the shares of saturated keys follow
 * their weights (counted in claims over picks, never in time), a key that arrives late is served in
 * its first pick or two whatever another key's backlog, an idle key's share goes to the others, and
 * the options are validated.
 */
@ExtendWith(PostgresExtension.class)
class FairnessIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    @Test
    void saturatedKeysShareClaimsByWeight(TestDatabase db) {
        PickSql picks = picks(db);
        insert(db, "weighted", "gold", 2_000);
        insert(db, "weighted", "silver", 2_000);
        insert(db, "weighted", "bronze", 2_000);
        FairPickSql.FairShare weights = share(Map.of("gold", 3.0, "silver", 2.0), 1);

        int claimed = 0;
        for (int i = 0; i < 50; i++) {
            List<ClaimedRow> rows = picks.pick("weighted", 12, "w", 60_000, weights).block(WAIT).rows();
            assertThat(rows).as("pick %d is full (work-conserving)", i).hasSize(12);
            claimed += rows.size();
        }
        Map<String, Long> shares = executingByKey(db, "weighted");
        assertThat(claimed).isEqualTo(600);
        assertThat(shares.get("gold")).as("gold's share of %s", shares).isBetween(291L, 309L);
        assertThat(shares.get("silver")).as("silver's share of %s", shares).isBetween(191L, 209L);
        assertThat(shares.get("bronze")).as("bronze's share of %s", shares).isBetween(91L, 109L);
    }

    @Test
    void aLateKeyIsServedInItsFirstPickOrTwoDespiteABacklog(TestDatabase db) {
        PickSql picks = picks(db);
        insert(db, "late", "whale", 100_000);
        // With statistics, the planner knows one key holds the queue: each key's rows must still be
        // read through the fair index, never by walking the pick index past the whale's.
        db.execute("ANALYZE " + instances(db));
        FairPickSql.FairShare weights = share(Map.of(), 1);
        for (int i = 0; i < 3; i++) {
            assertThat(picks.pick("late", 10, "w", 60_000, weights).block(WAIT).rows()).hasSize(10);
        }
        insert(db, "late", "minnow", 3);

        List<ClaimedRow> first = picks.pick("late", 10, "w", 60_000, weights).block(WAIT).rows();
        List<ClaimedRow> second = picks.pick("late", 10, "w", 60_000, weights).block(WAIT).rows();

        assertThat(first.size() + second.size()).isEqualTo(20);
        assertThat(executingByKey(db, "late").get("minnow")).as("the late key's rows claimed in its first two picks")
                .isEqualTo(3L);
    }

    @Test
    void anIdleKeysShareGoesToTheOthers(TestDatabase db) {
        PickSql picks = picks(db);
        insert(db, "idle", "a", 500);
        insert(db, "idle", "b", 500);
        insert(db, "idle", "c", 4);
        FairPickSql.FairShare weights = share(Map.of(), 1);
        int total = 0;
        for (int i = 0; i < 20; i++) {
            total += picks.pick("idle", 12, "w", 60_000, weights).block(WAIT).rows().size();
        }
        Map<String, Long> shares = executingByKey(db, "idle");
        assertThat(shares.get("c")).isEqualTo(4L);
        // c's drained share went to a and b: at most one pick came back short, while c ran dry.
        assertThat(total).isGreaterThanOrEqualTo(240 - 12);
        assertThat(Math.abs(shares.get("a") - shares.get("b"))).isLessThanOrEqualTo(12L);
        // The drained key is parked: later picks do not walk it.
        assertThat(Sql.query(db, "SELECT active FROM {schema}.durable_fair_keys WHERE queue = 'idle' AND fairness_key = 'c'",
                row -> row.get(0, Boolean.class))).containsExactly(false);
    }

    @Test
    void scheduledRowsOfAParkedKeyAreServedOnceDue(TestDatabase db) {
        PickSql picks = picks(db);
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key, eligible_at)"
                + " VALUES ('t', 'scheduled', 'run', 5, 'later', now() + interval '1 second')");
        FairPickSql.FairShare weights = share(Map.of(), 1);
        assertThat(picks.pick("scheduled", 5, "w", 60_000, weights).block(WAIT).rows()).isEmpty();
        assertThat(Sql.query(db, "SELECT active FROM {schema}.durable_fair_keys WHERE queue = 'scheduled' AND fairness_key = 'later'",
                row -> row.get(0, Boolean.class))).containsExactly(false);
        long deadline = System.nanoTime() + WAIT.toNanos();
        int claimed = 0;
        while (claimed == 0 && System.nanoTime() < deadline) {
            claimed = picks.pick("scheduled", 5, "w", 60_000, weights).block(WAIT).rows().size();
        }
        assertThat(claimed).isEqualTo(1);
    }

    @Test
    void theEngineRunsAFairQueueAndKeylessRowsShareTheEmptyKey(TestDatabase db) {
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class, (String s) -> reactor.core.publisher.Mono.just(s))
                .queue("fair");
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("fair").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().weight("acme", 3).build()).build()).build())
                .register(echo).build();
        try {
            engine.start().block(WAIT);
            // Scheduled a moment ahead, so they go in runnable (an idle worker would claim due rows as they go in).
            long keyed = engine.insert(JobRequest.of("echo", "a").fairnessKey("acme").runIn(Duration.ofMillis(300)))
                    .block(WAIT);
            long keyless = engine.insert(JobRequest.of("echo", "b").runIn(Duration.ofMillis(300))).block(WAIT);
            assertThat(engine.awaitSettled(keyed, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(engine.awaitSettled(keyless, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(Sql.query(db, "SELECT fairness_key FROM {schema}.durable_fair_keys WHERE queue = 'fair' ORDER BY 1",
                    row -> row.get(0, String.class))).containsExactly("", "acme");
            assertThatThrownBy(() -> engine.insert(JobRequest.of("echo", "c").fairnessKey("x".repeat(2000))).block(WAIT))
                    .isInstanceOf(InvalidRequestException.class).hasMessageContaining("fairnessKey");
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void aPerKeyCapHoldsAcrossTheQueue(TestDatabase db) {
        Map<String, java.util.concurrent.atomic.AtomicInteger> running = new java.util.concurrent.ConcurrentHashMap<>();
        Map<String, java.util.concurrent.atomic.AtomicInteger> most = new java.util.concurrent.ConcurrentHashMap<>();
        JobDefinition<String, String> capped = JobDefinition.of("capped", String.class, (String key) -> {
            int now = running.computeIfAbsent(key, k -> new java.util.concurrent.atomic.AtomicInteger()).incrementAndGet();
            most.computeIfAbsent(key, k -> new java.util.concurrent.atomic.AtomicInteger()).accumulateAndGet(now, Math::max);
            return reactor.core.publisher.Mono.delay(Duration.ofMillis(100))
                    .then(reactor.core.publisher.Mono.fromCallable(() -> {
                        running.get(key).decrementAndGet();
                        return key;
                    }));
        }).queue("capped");
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("capped").concurrency(10).pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().maxExecutingPerKey(2).build()).build()).build())
                .register(capped).build();
        try {
            engine.start().block(WAIT);
            List<Long> ids = new java.util.ArrayList<>();
            for (int i = 0; i < 12; i++) {
                String key = i % 2 == 0 ? "a" : "b";
                ids.add(engine.insert(JobRequest.of("capped", key).fairnessKey(key)).block(WAIT));
            }
            for (long id : ids) {
                assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
            assertThat(most.get("a").get()).as("most executing at once for key a").isBetween(1, 2);
            assertThat(most.get("b").get()).as("most executing at once for key b").isBetween(1, 2);
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void agingLiftsAWaitingRowOneLevelPerStepDownToTheFloor(TestDatabase db) {
        dev.durable.testing.TestClock clock = dev.durable.testing.TestClock.on(db);
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class,
                (String s) -> reactor.core.publisher.Mono.just(s)).queue("aging");
        DurableEngine engine = DurableEngine.builder(clock.engineOptions()
                        .queue(QueueOptions.builder("aging").pollInterval(Duration.ofMillis(50))
                                .maxPollInterval(Duration.ofMillis(100))
                                .fairness(Fairness.priorityAgingOnly(Duration.ofHours(1), -1)).build()).build())
                .register(echo).build();
        try {
            engine.migrate().block(WAIT);
            // A type this engine does not run: its picks leave the rows alone, its aging does not.
            db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, priority, eligible_at)"
                    + " VALUES ('other', 'aging', 'run', 5, 2, now()), ('other', 'aging', 'run', 5, -3, now())");
            engine.start().block(WAIT);
            clock.advance(Duration.ofMinutes(150));
            awaitPriorities(db, "0,-3");
            clock.advance(Duration.ofHours(5));
            awaitPriorities(db, "-1,-3");
            // At the floor it stays, however long it waits.
            clock.advance(Duration.ofHours(5));
            sleep(Duration.ofSeconds(3));
            assertThat(priorities(db)).isEqualTo("-1,-3");
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    private static String priorities(TestDatabase db) {
        return String.join(",", Sql.query(db, "SELECT priority::text FROM {schema}.durable_instances"
                + " WHERE queue = 'aging' ORDER BY id", row -> row.get(0, String.class)));
    }

    private static void awaitPriorities(TestDatabase db, String expected) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!priorities(db).equals(expected) && System.nanoTime() < deadline) {
            sleep(Duration.ofMillis(100));
        }
        assertThat(priorities(db)).isEqualTo(expected);
    }

    private static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Test
    void aWeigherWeighsTheKeysInLineAndThePickFollowsTheStoredWeights(TestDatabase db) {
        JobDefinition<String, String> echo = JobDefinition.of("echo", String.class,
                (String s) -> reactor.core.publisher.Mono.just(s)).queue("weighed");
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("weighed").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.builder().weigher(key -> key.startsWith("pro") ? 4 : null).build())
                                .build()).build())
                .register(echo).build();
        try {
            engine.migrate().block(WAIT);
            // Of a type this engine does not run, so they stay runnable and their keys in line.
            for (String key : List.of("pro-1", "free-1")) {
                db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key)"
                        + " SELECT 'other', 'weighed', 'run', 5, '" + key + "' FROM generate_series(1, 600)");
            }
            engine.start().block(WAIT);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (weights(db).size() < 2 && System.nanoTime() < deadline) {
                sleep(Duration.ofMillis(100));
            }
            assertThat(weights(db)).containsExactly("free-1 1", "pro-1 4");
        } finally {
            engine.closeLater().block(WAIT);
        }
        // Any engine's pick reads the stored weights: 4:1.
        PickSql picks = picks(db, "other");
        FairPickSql.FairShare none = share(Map.of(), 1);
        for (int i = 0; i < 20; i++) {
            assertThat(picks.pick("weighed", 10, "w", 60_000, none).block(WAIT).rows()).hasSize(10);
        }
        Map<String, Long> shares = executingByKey(db, "weighed");
        assertThat(shares.get("pro-1")).as("shares %s", shares).isBetween(155L, 165L);
    }

    private static List<String> weights(TestDatabase db) {
        return Sql.query(db, "SELECT fairness_key || ' ' || weight FROM {schema}.durable_fair_keys"
                + " WHERE queue = 'weighed' AND weight IS NOT NULL ORDER BY 1", row -> row.get(0, String.class));
    }

    @Test
    void aPicksCostDoesNotGrowWithTenantsWithoutWorkNorWithAnotherTenantsBacklog(TestDatabase db) {
        PickSql picks = picks(db);
        for (String key : List.of("a", "b", "c")) {
            insert(db, "cost", key, 20);
        }
        db.execute("ANALYZE " + instances(db));
        long alone = buffers(db, picks.fairPickText());

        insert(db, "cost", "whale", 100_000);
        db.execute("INSERT INTO \"" + db.schema() + "\".durable_fair_keys (queue, fairness_key, pass, active)"
                + " SELECT 'cost', 'idle-' || g, 0, false FROM generate_series(1, 10000) g");
        db.execute("VACUUM ANALYZE " + instances(db));
        long crowded = buffers(db, picks.fairPickText());

        assertThat(crowded).as("pages of a fair pick beside 10,000 idle tenants and a 100k backlog (alone: %d)", alone)
                .isLessThanOrEqualTo(2 * alone + 50);
    }

    @Test
    void aThrottledKeysBacklogIsNotWalkedPerPick(TestDatabase db) {
        PickSql picks = picks(db);
        for (String key : List.of("a", "b", "c")) {
            insert(db, "throttle", key, 20);
        }
        db.execute("ANALYZE " + instances(db));
        long alone = buffers(db, picks.fairPickText(), "throttle");

        // 20,000 due rows of one key that the pick's limit filter refuses (a rate limit this engine
        // does not know: the same filter as a bucket or window known to be full).
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key, eligible_at,"
                + " rate_limit, rate_weight) SELECT 't', 'throttle', 'run', 5, 'throttled', now() - interval '1 second',"
                + " 'r', 1 FROM generate_series(1, 20000)");
        db.execute("VACUUM ANALYZE " + instances(db));
        long throttled = buffers(db, picks.fairPickText(), "throttle");

        assertThat(throttled).as("pages of a fair pick beside a throttled 20k-row key (alone: %d)", alone)
                .isLessThanOrEqualTo(2 * alone + 50);
    }

    /** The shared pages one fair pick of 32 touches (EXPLAIN ANALYZE, BUFFERS), rolled back. */
    private static long buffers(TestDatabase db, String pick) {
        return buffers(db, pick, "cost");
    }

    /** As above, on {@code queue}. */
    private static long buffers(TestDatabase db, String pick, String queue) {
        io.r2dbc.spi.Connection connection = reactor.core.publisher.Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            var explain = connection.createStatement("EXPLAIN (ANALYZE, BUFFERS) " + pick)
                    .bind(0, queue).bind(1, 32).bind(2, "w").bind(3, 30_000L)
                    .bind(4, new String[] {"t"}).bind(5, new Integer[] {1})
                    .bind(6, new String[0]).bind(7, new Double[0]).bind(8, 1.0).bind(9, new String[0])
                    .bindNull(10, Integer.class);
            List<String> plan = reactor.core.publisher.Mono.from(connection.beginTransaction())
                    .thenMany(reactor.core.publisher.Flux.from(explain.execute())
                            .concatMap(result -> result.map(row -> row.get(0, String.class))))
                    .collectList()
                    .flatMap(lines -> reactor.core.publisher.Mono.from(connection.rollbackTransaction()).thenReturn(lines))
                    .block(WAIT);
            assertThat(plan.get(0)).as("the pick claims 32 rows:\n%s", String.join("\n", plan)).contains("rows=32 loops=1");
            String line = plan.stream().filter(l -> l.contains("Buffers: shared")).findFirst().orElseThrow();
            long pages = 0;
            for (String part : line.substring(line.indexOf("shared") + 6).trim().split(" ")) {
                int eq = part.indexOf('=');
                if (eq > 0 && (part.startsWith("hit") || part.startsWith("read"))) {
                    pages += Long.parseLong(part.substring(eq + 1));
                }
            }
            return pages;
        } finally {
            reactor.core.publisher.Mono.from(connection.close()).block(WAIT);
        }
    }

    @Test
    void aFollowUpInAFairQueueKeepsItsKeyAndRuns(TestDatabase db) {
        reactor.core.publisher.Sinks.One<Void> release = reactor.core.publisher.Sinks.one();
        JobDefinition<String, String> slow = JobDefinition.of("slow", String.class,
                (String s) -> s.equals("first") ? release.asMono().thenReturn(s) : reactor.core.publisher.Mono.just(s))
                .queue("follow");
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("follow").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.equalShares()).build()).build())
                .register(slow).build();
        try {
            engine.start().block(WAIT);
            long first = engine.insert(JobRequest.of("slow", "first").fairnessKey("t").correlationKey("k")).block(WAIT);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (engine.get(first).block(WAIT).status() != InstanceStatus.EXECUTING && System.nanoTime() < deadline) {
                sleep(Duration.ofMillis(50));
            }
            InsertResult followUp = engine.insertWithResult(JobRequest.of("slow", "second").fairnessKey("t")
                    .correlationKey("k").onConflict(ConflictPolicy.replace())).block(WAIT);
            assertThat(followUp.disposition()).isEqualTo(InsertResult.Disposition.FOLLOW_UP);
            release.tryEmitEmpty();
            assertThat(engine.awaitSettled(first, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(engine.awaitSettled(followUp.id(), WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    /** A settled row keeps its key in the history: a retry in place and a replay run it again under its key. */
    @Test
    void aRetriedOrReplayedRowOfAFairQueueComesBackUnderItsKeyAndRuns(TestDatabase db) {
        java.util.concurrent.atomic.AtomicInteger runs = new java.util.concurrent.atomic.AtomicInteger();
        JobDefinition<String, String> flaky = JobDefinition.of("flaky", String.class, (String s) -> runs.incrementAndGet() == 1
                        ? reactor.core.publisher.Mono.<String>error(new IllegalStateException("first run fails"))
                        : reactor.core.publisher.Mono.just(s))
                .queue("again").maxAttempts(1);
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("again").pollInterval(Duration.ofMillis(50))
                                .fairness(Fairness.equalShares()).build()).build())
                .register(flaky).build();
        try {
            engine.start().block(WAIT);
            long id = engine.insert(JobRequest.of("flaky", "x").fairnessKey("tenant-r")).block(WAIT);
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
            assertThat(Sql.query(db, "SELECT fairness_key FROM {schema}.durable_history WHERE id = $1",
                    row -> row.get(0, String.class), id)).containsExactly("tenant-r");

            engine.admin().retry(id).block(WAIT);
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            engine.replay(id, JobDefinition.STEP).block(WAIT);
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(runs.get()).isEqualTo(3);
        } finally {
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void badFairnessOptionsAreRefusedNamingTheOption() {
        assertThatThrownBy(() -> Fairness.builder().weight("a", 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("weight of key 'a'");
        assertThatThrownBy(() -> Fairness.builder().defaultWeight(Double.NaN))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("defaultWeight");
        assertThatThrownBy(() -> Fairness.builder().weight("k".repeat(1025), 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fairness key");
        assertThatThrownBy(() -> Fairness.builder().maxExecutingPerKey(0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxExecutingPerKey");
        assertThatThrownBy(() -> Fairness.builder().aging(Duration.ZERO, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aging step");
        assertThatThrownBy(() -> Fairness.builder().aging(Duration.ofSeconds(1), 40_000))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aging floor");
        assertThat(QueueOptions.of("q").fairness().enabled()).isFalse();
        assertThat(Fairness.priorityAgingOnly(Duration.ofMinutes(1), 0).enabled()).isFalse();
        assertThat(Fairness.priorityAgingOnly(Duration.ofMinutes(1), 0).agingStep()).isEqualTo(Duration.ofMinutes(1));
        assertThat(QueueOptions.builder("q").fairness(Fairness.equalShares()).build().mutate().build().fairness())
                .isEqualTo(Fairness.equalShares());
    }

    static PickSql picks(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        return picks(db, "t");
    }

    static PickSql picks(TestDatabase db, String type) {
        return new PickSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()), List.of(), List.of(),
                Map.of(type, 1));
    }

    static FairPickSql.FairShare share(Map<String, Double> weights, double defaultWeight) {
        return new FairPickSql.FairShare(weights.keySet().toArray(String[]::new), weights.values().toArray(Double[]::new),
                defaultWeight);
    }

    static String instances(TestDatabase db) {
        return "\"" + db.schema() + "\".durable_instances";
    }

    static void insert(TestDatabase db, String queue, String key, int rows) {
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, fairness_key, eligible_at)"
                + " SELECT 't', '" + queue + "', 'run', 5, '" + key + "', now() - interval '1 second'"
                + " FROM generate_series(1, " + rows + ")");
    }

    static Map<String, Long> executingByKey(TestDatabase db, String queue) {
        Map<String, Long> shares = new HashMap<>();
        Sql.query(db, "SELECT fairness_key, count(*) FROM {schema}.durable_instances WHERE status = 'executing'"
                        + " AND queue = '" + queue + "' GROUP BY fairness_key", row -> Map.entry(row.get(0, String.class), row.get(1, Long.class)))
                .forEach(e -> shares.put(e.getKey(), e.getValue()));
        return shares;
    }
}
