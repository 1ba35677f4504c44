package dev.durable.benchmarks.chaos;

import dev.durable.Backoff;
import dev.durable.Claim;
import dev.durable.Definition;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.RecurringJob;
import dev.durable.StateMigration;
import dev.durable.WorkflowDefinition;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The chaos workload: what users run. Every handler records its execution in {@code chaos_exec}
 * before it works (with the claim the row showed at that moment), and puts a fresh token in what it
 * commits: a job's result, each workflow step's state ({@code last}, appended to {@code tokens}), a
 * failing attempt's error ({@code chaos-token:...}). The audit trigger of {@link ChaosSchema} sees
 * which token each transition wrote, so the checker knows, from the database alone, which execution
 * committed and under which claim.
 *
 * <ul>
 *   <li>{@value #JOB} on {@value #JOBS}: plain, keyed (an ungated concurrency key), gated (a gate of
 *       {@value #GATE_CAPACITY} per key), rate limited (per partition), flaky (errors, retried),
 *       long, and doomed ones (always fail, two attempts: the only jobs meant to fail); bursts into
 *       a sliding window, a gate key and a bucket, more than each takes at once (see {@link #bursts});
 *       also the recurring job's runs and the workflows' children; with a burn (overload runs),
 *       each of these jobs also spends that much CPU;
 *   <li>{@value #TX} on {@value #JOBS}: transactional jobs (plain, flaky or doomed) that write their
 *       effect row ({@code chaos_effects}, with the execution's token) in the transaction that commits
 *       their outcome: exactly one for a done job, the one of the execution that committed, and none
 *       for any other ({@link ChaosSchema#transactionalEffects}); and slow ones, {@value #SOLO_TX},
 *       on {@value #SOLO_QUEUE};
 *   <li>{@value #FLOW} on {@value #FLOWS}: an inline chain that takes a concurrency key, a step
 *       through the queue, children and their join, a {@code retry} outcome on the join's first
 *       run, an await of {@value #GO} with a timeout, then done;
 *   <li>{@value #DEEP} on {@value #DEEP_QUEUE}: slow jobs on a queue with one run slot and a deep
 *       prefetch, so claimed rows wait in buffers longer than the lease (the heartbeat must keep them);
 *   <li>{@value #SOLO} and {@value #POISON} on {@value #SOLO_QUEUE}, which only the worker JVM runs:
 *       slow jobs (one worker re-claims its own rows after a lost lease), and poison jobs that halt
 *       the JVM (two attempts, then failed: meant to fail).
 * </ul>
 */
final class ChaosWorkload {

    static final String JOBS = "chaos-jobs";
    static final String FLOWS = "chaos-flows";
    static final String DEEP_QUEUE = "chaos-deep";
    static final String SOLO_QUEUE = "chaos-solo";
    static final String JOB = "chaos.job";
    static final String FLOW = "chaos.flow";
    static final String DEEP = "chaos.deep";
    static final String SOLO = "chaos.solo";
    static final String POISON = "chaos.poison";
    /** The transactional job: its effect row is written in the transaction that commits its outcome. */
    static final String TX = "chaos.tx";
    /**
     * The slow transactional job, on {@value #SOLO_QUEUE}: a worker JVM stopped past its lease holds
     * some mid-run, and those that reach their commit after it resumes are refused by the guard.
     */
    static final String SOLO_TX = "chaos.solo-tx";
    /** The transactional types, quoted for SQL. */
    static final String TX_TYPES = "('" + TX + "', '" + SOLO_TX + "')";
    static final String GO = "go";
    /**
     * The keys a flow takes from its chain on: each runs one step at a time, about five per flow, so
     * they carry ten flows a second with room to spare (four, before, were the workload's own
     * bottleneck on a loaded machine: a backlog of keyed flows grew for as long as the load lasted).
     */
    static final int FLOW_KEYS = 16;
    /** The step version 2 of {@value #FLOW} adds (see {@link #generation}). */
    static final String AUDIT = "audit";
    static final String GATE = "chaos-gate";
    static final int GATE_CAPACITY = 2;
    static final String RATE = "chaos-rate";
    static final double RATE_PER_SECOND = 4;
    static final int RATE_BURST = 4;
    static final String WINDOW = "chaos-window";
    static final int WINDOW_LIMIT = 4;
    static final Duration WINDOW_LENGTH = Duration.ofSeconds(2);
    static final int WINDOW_BURST = 6;
    static final int GATE_BURST = 5;
    static final int RATE_BURST_JOBS = 10;
    static final String TICK = "chaos-tick";
    /** The error of a failed attempt carries its token after this. */
    static final String TOKEN_MARK = "chaos-token:";

    /** A job's arguments: how long it works and its fate: {@code ok}, {@code flaky} or {@code doomed}. */
    record JobArgs(int sleepMs, String fate) {
    }

    /** A workflow's state: the tokens its committed steps wrote, in order, and the last one. */
    record FlowState(List<String> tokens, @Nullable String last, int children) {

        FlowState with(String token) {
            List<String> next = new ArrayList<>(tokens);
            next.add(token);
            return new FlowState(next, token, children);
        }
    }

    /** A started execution: its token, and how many executions of that step of that row came before. */
    private record Started(String token, long before) {
    }

    private final String label;
    private final ConnectionFactory recorder;
    private final String schema;
    private final boolean halts;
    private final Duration burn;
    private final int generation;

    /**
     * @param label    who runs the handlers: unique per engine incarnation, stored with each execution
     * @param recorder where executions are recorded (never through an engine's faulted connections)
     * @param halts    whether the poison job really halts this JVM (only in the worker JVM)
     * @param burn     the CPU each plain job spends on top of its sleep (zero but in overload runs)
     * @param generation which release of the workflow this engine runs: 1, or 2 (version 2 of
     *                 {@value #FLOW}, with a new step {@value #AUDIT} and a migration from version 1)
     */
    ChaosWorkload(String label, ConnectionFactory recorder, String schema, boolean halts, Duration burn,
            int generation) {
        this.label = label;
        this.recorder = recorder;
        this.schema = schema;
        this.halts = halts;
        this.burn = burn;
        this.generation = generation;
    }

    List<Definition> definitions() {
        JobDefinition<JobArgs, Map<String, String>> job = JobDefinition.<JobArgs, Map<String, String>>of(JOB,
                        JobArgs.class, (args, ctx) -> started(ctx.claim(), JOB)
                                .flatMap(run -> Mono.delay(Duration.ofMillis(args.sleepMs()))
                                        .then(Mono.fromRunnable(this::burn))
                                        .then(Mono.defer(() -> finish(run.token(), args.fate())))))
                .queue(JOBS)
                .backoff(Backoff.fixed(Duration.ofMillis(200)))
                .timeout(Duration.ofSeconds(30));
        JobDefinition<JobArgs, Map<String, String>> deep = slow(DEEP, DEEP_QUEUE);
        JobDefinition<JobArgs, Map<String, String>> solo = slow(SOLO, SOLO_QUEUE);
        JobDefinition<String, String> poison = JobDefinition.<String, String>of(POISON, String.class,
                        (ignored, ctx) -> started(ctx.claim(), POISON)
                                .flatMap(run -> ended(run.token(), "halt"))
                                .then(Mono.fromCallable(() -> {
                                    if (!halts) {
                                        throw new IllegalStateException("the poison job runs in the worker JVM only");
                                    }
                                    // As an OOM or a segfault would: no cleanup, no goodbye.
                                    Runtime.getRuntime().halt(3);
                                    return "unreachable";
                                })))
                .queue(SOLO_QUEUE)
                .maxAttempts(2)
                .backoff(Backoff.fixed(Duration.ofMillis(300)));

        WorkflowDefinition.Builder<FlowState> flow = WorkflowDefinition.builder(FLOW, FlowState.class)
                .queue(FLOWS)
                .backoff(Backoff.fixed(Duration.ofMillis(200)))
                .timeout(Duration.ofSeconds(30))
                .step("begin", ctx -> step(ctx.claim(), run ->
                        Outcome.next("chain", ctx.state().with(run.token())).inline()))
                .step("chain", ctx -> step(ctx.claim(), run ->
                        Outcome.next("keyed", ctx.state().with(run.token())).inline()
                                .concurrencyKey("wfk-" + ctx.id() % FLOW_KEYS)))
                .step("keyed", ctx -> step(ctx.claim(), run ->
                        Outcome.next(generation == 2 ? AUDIT : "fanout", ctx.state().with(run.token()))))
                .step("fanout", ctx -> step(ctx.claim(), run ->
                        Outcome.spawnChildren(children(ctx.state().children()), "join",
                                ctx.state().with(run.token()))))
                .step("join", ctx -> step(ctx.claim(), run -> run.before() == 0
                        // The join's first run asks to run again: a retry outcome commits no token.
                        ? Outcome.<FlowState>retry(Duration.ofMillis(100))
                        : Outcome.await(Set.of(GO), "finish", ctx.state().with(run.token()), Duration.ofSeconds(2))))
                .step("finish", ctx -> step(ctx.claim(), run ->
                        Outcome.done(Map.of("token", run.token(), "signalled", !ctx.signals().isEmpty(),
                                "children", ctx.children().size()))));
        if (generation == 2) {
            // The next release: a step between keyed and fanout; a version 1 instance (its state has
            // the same shape) migrates when a node of this release claims it.
            flow.version(2)
                    .step(AUDIT, ctx -> step(ctx.claim(), run ->
                            Outcome.next("fanout", ctx.state().with(run.token()))))
                    .migration(StateMigration.from(1).state(FlowState.class, old -> old));
        }
        return List.of(job, flow.build(), deep, solo, poison, transactional(TX, JOBS), transactional(SOLO_TX, SOLO_QUEUE));
    }

    /**
     * The transactional job: records its execution (on the recorder, committed at once), writes its
     * effect on the run's transaction, works, and ends as its fate says; a failing attempt's effect
     * rolls back with it.
     */
    private JobDefinition<JobArgs, Map<String, String>> transactional(String type, String queue) {
        String effects = "INSERT INTO " + ChaosSchema.q(schema) + ".chaos_effects (instance_id, token) VALUES ($1, $2)";
        return JobDefinition.<JobArgs, Map<String, String>>transactional(type, JobArgs.class,
                        (args, ctx, transaction) -> started(ctx.claim(), type)
                                .flatMap(run -> Flux.from(transaction.createStatement(effects).bind(0, ctx.id())
                                                .bind(1, run.token()).execute())
                                        .flatMap(result -> result.getRowsUpdated())
                                        .then(Mono.delay(Duration.ofMillis(args.sleepMs())))
                                        .then(Mono.fromRunnable(this::burn))
                                        .then(Mono.defer(() -> finish(run.token(), args.fate())))))
                .queue(queue)
                .backoff(Backoff.fixed(Duration.ofMillis(200)))
                .timeout(Duration.ofSeconds(30));
    }

    /** The recurring job: a plain job every minute, exactly once across the engines. */
    static RecurringJob tick() {
        return RecurringJob.of(TICK, "* * * * *", JobRequest.of(JOB, new JobArgs(20, "ok")));
    }

    private JobDefinition<JobArgs, Map<String, String>> slow(String type, String queue) {
        return JobDefinition.<JobArgs, Map<String, String>>of(type, JobArgs.class,
                        (args, ctx) -> started(ctx.claim(), type)
                                .flatMap(run -> Mono.delay(Duration.ofMillis(args.sleepMs()))
                                        .then(type.equals(SOLO) ? stallHandshake(run.token()) : Mono.empty())
                                        .then(Mono.defer(() -> finish(run.token(), args.fate())))))
                .queue(queue)
                .backoff(Backoff.fixed(Duration.ofMillis(200)))
                .timeout(Duration.ofSeconds(30));
    }

    /**
     * Spends {@link #burn} of this thread's CPU time (not of wall time: on a starved machine the
     * demand stays what was asked), on the scheduler thread the handler runs on, as a handler that
     * computes does.
     */
    private void burn() {
        if (burn.isZero()) {
            return;
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long until = threads.getCurrentThreadCpuTime() + burn.toNanos();
        while (threads.getCurrentThreadCpuTime() < until) {
            Thread.onSpinWait();
        }
    }

    private Mono<Map<String, String>> finish(String token, String fate) {
        boolean fails = "doomed".equals(fate)
                || "flaky".equals(fate) && ThreadLocalRandom.current().nextInt(10) < 3;
        if (fails) {
            return ended(token, "error").then(Mono.error(new IllegalStateException(fate + " job " + TOKEN_MARK + token)));
        }
        return ended(token, "ok").thenReturn(Map.of("token", token));
    }

    // ---- requests -----------------------------------------------------------------------------

    /** A random job: plain, keyed, gated, rate limited, flaky, long or doomed; one in ten transactional. */
    static JobRequest randomJob() {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        int sleep = random.nextInt(100) < 3 ? 1500 + random.nextInt(2500) : 10 + random.nextInt(140);
        int kind = random.nextInt(100);
        String fate = kind < 4 ? "doomed" : kind < 24 ? "flaky" : "ok";
        String type = random.nextInt(10) == 0 ? TX : JOB;
        JobRequest request = JobRequest.of(type, new JobArgs(sleep, fate)).priority(random.nextInt(5) - 2);
        if (fate.equals("doomed")) {
            request = request.maxAttempts(2);
        }
        int limit = random.nextInt(100);
        if (limit < 20) {
            request = request.concurrencyKey("k" + random.nextInt(6));
        } else if (limit < 35) {
            request = request.gate(GATE, "g" + random.nextInt(3));
        } else if (limit < 50) {
            request = request.rateLimit(RATE, 1, "p" + random.nextInt(2));
        }
        if (random.nextInt(10) == 0) {
            request = request.runIn(Duration.ofMillis(random.nextInt(500)));
        }
        return request;
    }

    static JobRequest randomFlow() {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        JobRequest request = JobRequest.of(FLOW, new FlowState(List.of(), null, 1 + random.nextInt(3)));
        if (random.nextBoolean()) {
            request = request.concurrencyKey("wf" + random.nextInt(4));
        }
        return request;
    }

    /**
     * The bursts of insert tick {@code tick} (one every 100 ms): every 2 s, {@value #WINDOW_BURST}
     * short jobs into one partition of the sliding window, more than it takes ({@value #WINDOW_LIMIT}
     * per {@link #WINDOW_LENGTH}); every 2 s, {@value #GATE_BURST} slow ones into one gate key, more
     * than its {@value #GATE_CAPACITY} slots; every 4 s, {@value #RATE_BURST_JOBS} into one bucket
     * partition, more than its burst. So each limit always has rows to hold back, and one that lets
     * too many through shows it; each burst drains before the next of its kind.
     */
    static List<JobRequest> bursts(long tick) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        List<JobRequest> burst = new ArrayList<>();
        if (tick % 20 == 0) {
            for (int i = 0; i < WINDOW_BURST; i++) {
                burst.add(JobRequest.of(JOB, new JobArgs(10 + random.nextInt(50), "ok"))
                        .window(WINDOW, "w" + (tick / 20) % 2));
            }
        } else if (tick % 20 == 7) {
            for (int i = 0; i < GATE_BURST; i++) {
                burst.add(JobRequest.of(JOB, new JobArgs(300 + random.nextInt(300), "ok")).gate(GATE, "gb"));
            }
        } else if (tick % 40 == 14) {
            for (int i = 0; i < RATE_BURST_JOBS; i++) {
                burst.add(JobRequest.of(JOB, new JobArgs(10 + random.nextInt(50), "ok")).rateLimit(RATE, 1, "pb"));
            }
        }
        return burst;
    }

    /** A job that holds a slot of gate key {@code key} for 6 s: across a Redis restart. */
    static JobRequest gateHolder(String key) {
        return JobRequest.of(JOB, new JobArgs(6000, "ok")).gate(GATE, key);
    }

    /** Jobs of a second each, more than gate key {@code key} takes at once: they wait for its slots. */
    static List<JobRequest> gateWaiters(String key) {
        List<JobRequest> waiters = new ArrayList<>();
        for (int i = 0; i <= GATE_CAPACITY; i++) {
            waiters.add(JobRequest.of(JOB, new JobArgs(1000, "ok")).gate(GATE, key));
        }
        return waiters;
    }

    static JobRequest deepJob() {
        return JobRequest.of(DEEP, new JobArgs(800 + ThreadLocalRandom.current().nextInt(1200), "ok"));
    }

    /** A slow job (3 to 6 s) for the worker JVM's queue: {@value #SOLO} or {@value #SOLO_TX}. */
    static JobRequest soloJob(String type) {
        return JobRequest.of(type, new JobArgs(3000 + ThreadLocalRandom.current().nextInt(3000), "ok"));
    }

    static JobRequest poisonJob() {
        return JobRequest.of(POISON, "halt");
    }

    private static List<JobRequest> children(int n) {
        List<JobRequest> children = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ThreadLocalRandom random = ThreadLocalRandom.current();
            JobRequest child = JobRequest.of(JOB, new JobArgs(10 + random.nextInt(90),
                    random.nextInt(4) == 0 ? "flaky" : "ok"));
            if (random.nextInt(10) < 3) {
                child = child.concurrencyKey("ck" + random.nextInt(6));
            }
            children.add(child);
        }
        return children;
    }

    /**
     * When the harness armed a stall, the first solo handler to get here marks itself waiting and
     * returns only once the harness froze the worker JVM's connections (or after a few seconds), so
     * the commit of its outcome is sent on a frozen connection and lands after its caller gave up.
     */
    private Mono<Void> stallHandshake(String token) {
        String s = ChaosSchema.q(schema);
        Mono<Long> frozen = count("SELECT count(*) FROM " + s + ".chaos_stall WHERE id = 1 AND frozen");
        return update("UPDATE " + s + ".chaos_stall SET waiting = $1 WHERE id = 1 AND armed AND waiting IS NULL", token)
                .flatMap(claimed -> claimed == 0 ? Mono.empty()
                        : frozen.filter(n -> n > 0)
                                .repeatWhenEmpty(ticks -> ticks.delayElements(Duration.ofMillis(20)).take(250))
                                .then())
                .onErrorResume(error -> Mono.empty());
    }

    private Mono<Long> update(String sql, Object... args) {
        return Flux.usingWhen(recorder.create(), (Connection c) -> {
                    var statement = c.createStatement(sql);
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).flatMap(result -> result.getRowsUpdated());
                }, Connection::close)
                .reduce(0L, Long::sum);
    }

    private Mono<Long> count(String sql) {
        return Flux.usingWhen(recorder.create(), (Connection c) -> Flux.from(c.createStatement(sql).execute())
                        .flatMap(result -> result.map((row, meta) -> ((Number) row.get(0)).longValue())),
                        Connection::close)
                .next();
    }

    // ---- recording ----------------------------------------------------------------------------

    private <S> Mono<Outcome<S>> step(Claim claim, Function<Started, Outcome<S>> outcome) {
        return started(claim, FLOW)
                .flatMap(run -> Mono.delay(Duration.ofMillis(5 + ThreadLocalRandom.current().nextInt(60)))
                        .then(ended(run.token(), "ok"))
                        .then(Mono.fromCallable(() -> outcome.apply(run))));
    }

    /**
     * Records the start of an execution of {@code claim} with the claim the row shows right now (the
     * claiming transaction too: null for a claim that recorded none), and emits its token and how
     * many executions of that step came before; an error when it cannot be recorded (the run then
     * fails like any handler error).
     */
    private Mono<Started> started(Claim claim, String type) {
        long id = claim.id();
        String step = claim.step();
        int attempt = claim.attempt();
        String token = UUID.randomUUID().toString();
        String s = '"' + schema + '"';
        String sql = ("INSERT INTO S.chaos_exec (token, instance_id, type, step, attempt, claim_xid, label, generation,"
                + " started_at, seen_status, seen_step, seen_attempt, seen_claimed_by, seen_version, seen_claim_xid)"
                + " SELECT $1, $2, $3, $4, $5, NULLIF($8::bigint, 0), $6, $7, clock_timestamp(), i.status, i.step,"
                + " i.attempt, i.claimed_by, i.type_version, h.claim_xid"
                + " FROM (SELECT 1) one LEFT JOIN S.durable_instances_all i ON i.id = $2"
                + " LEFT JOIN S.durable_instances h ON h.id = $2"
                + " RETURNING (SELECT count(*) FROM S.chaos_exec p WHERE p.instance_id = $2 AND p.step = $4)")
                .replace("S.", s + ".");
        return Flux.usingWhen(recorder.create(), (Connection c) -> Flux.from(c.createStatement(sql)
                                .bind(0, token).bind(1, id).bind(2, type).bind(3, step).bind(4, attempt).bind(5, label)
                                .bind(6, generation).bind(7, claim.stamp()).execute())
                        .flatMap(result -> result.map((row, meta) -> ((Number) row.get(0)).longValue())),
                        Connection::close)
                // The whole exchange, not its first row: RETURNING sends the row before the insert
                // commits, and a backend killed in between would leave a run the audit cannot see.
                .last()
                .map(before -> new Started(token, before));
    }

    /** Best effort: the end time is informative, the checker does not rely on it. */
    private Mono<Void> ended(String token, String outcome) {
        String sql = "UPDATE \"" + schema + "\".chaos_exec SET ended_at = clock_timestamp(), outcome = $2 WHERE token = $1";
        return Flux.usingWhen(recorder.create(), (Connection c) -> Flux.from(c.createStatement(sql)
                                .bind(0, token).bind(1, outcome).execute())
                        .flatMap(result -> result.getRowsUpdated()), Connection::close)
                .then()
                .onErrorResume(error -> Mono.empty());
    }
}
