package dev.durable.chaos;

import dev.durable.Backoff;
import dev.durable.Definition;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.WorkflowDefinition;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The chaos workload: a job type and a workflow type whose handlers record every execution in
 * {@code chaos_exec} (before doing their work, with the database's {@code clock_timestamp()}) and
 * put a fresh token in what they commit: the job's result, each workflow step's state ({@code last},
 * appended to {@code tokens}) and the workflow's result. The audit trigger of {@link ChaosSchema}
 * sees which token each commit wrote, so the checker knows, from the database alone, which
 * executions committed and under which claim.
 *
 * <p>Shared by the in-process engines and by the separate worker JVM ({@link ChaosWorker}).
 */
final class ChaosWorkload {

    static final String JOBS = "chaos-jobs";
    static final String FLOWS = "chaos-flows";
    static final String JOB = "chaos.job";
    static final String FLOW = "chaos.flow";
    static final String GO = "go";

    /** A job's arguments: how long it works, whether it may fail. */
    record JobArgs(int sleepMs, boolean flaky) {
    }

    /** A workflow's state: the tokens its committed steps wrote, in order, and the last one. */
    record FlowState(List<String> tokens, String last, int children) {

        FlowState with(String token) {
            List<String> next = new ArrayList<>(tokens);
            next.add(token);
            return new FlowState(next, token, children);
        }
    }

    private final String label;
    private final ConnectionFactory recorder;
    private final String schema;

    /**
     * @param label    who runs the handlers: unique per engine incarnation, stored with each execution
     * @param recorder where executions are recorded (not an engine's own pool)
     */
    ChaosWorkload(String label, ConnectionFactory recorder, String schema) {
        this.label = label;
        this.recorder = recorder;
        this.schema = schema;
    }

    List<Definition> definitions() {
        JobDefinition<JobArgs, Map<String, String>> job = JobDefinition.<JobArgs, Map<String, String>>of(JOB,
                        JobArgs.class, (args, ctx) -> started(ctx.id(), JOB, JobDefinition.STEP, ctx.attempt())
                                .flatMap(token -> Mono.delay(Duration.ofMillis(args.sleepMs()))
                                        .then(Mono.defer(() -> {
                                            if (args.flaky() && ThreadLocalRandom.current().nextInt(10) < 3) {
                                                return ended(token, "error")
                                                        .then(Mono.error(new IllegalStateException("flaky job")));
                                            }
                                            return ended(token, "ok").thenReturn(Map.of("token", token));
                                        }))))
                .queue(JOBS)
                .backoff(Backoff.fixed(Duration.ofMillis(200)))
                .timeout(Duration.ofSeconds(30));

        WorkflowDefinition<FlowState> flow = WorkflowDefinition.builder(FLOW, FlowState.class)
                .queue(FLOWS)
                .backoff(Backoff.fixed(Duration.ofMillis(200)))
                .timeout(Duration.ofSeconds(30))
                .step("begin", ctx -> step(ctx.id(), ctx.step(), ctx.attempt(), token ->
                        Outcome.next("fanout", ctx.state().with(token)).concurrencyKey("wfk-" + ctx.id() % 4)))
                .step("fanout", ctx -> step(ctx.id(), ctx.step(), ctx.attempt(), token ->
                        Outcome.spawnChildren(children(ctx.state().children()), "join", ctx.state().with(token))))
                .step("join", ctx -> step(ctx.id(), ctx.step(), ctx.attempt(), token ->
                        Outcome.await(Set.of(GO), "finish", ctx.state().with(token), Duration.ofSeconds(2))))
                .step("finish", ctx -> step(ctx.id(), ctx.step(), ctx.attempt(), token ->
                        Outcome.done(Map.of("token", token, "signalled", !ctx.signals().isEmpty(),
                                "children", ctx.children().size()))))
                .build();
        return List.of(job, flow);
    }

    /** A random job request: some with a concurrency key, some flaky, a few long. */
    static JobRequest randomJob() {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        int sleep = random.nextInt(100) < 3 ? 1500 + random.nextInt(2500) : 10 + random.nextInt(140);
        JobRequest request = JobRequest.of(JOB, new JobArgs(sleep, random.nextInt(5) == 0))
                .priority(random.nextInt(5) - 2);
        if (random.nextInt(10) < 3) {
            request = request.concurrencyKey("k" + random.nextInt(6));
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

    private static List<JobRequest> children(int n) {
        List<JobRequest> children = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ThreadLocalRandom random = ThreadLocalRandom.current();
            JobRequest child = JobRequest.of(JOB, new JobArgs(10 + random.nextInt(90), random.nextInt(4) == 0));
            if (random.nextInt(10) < 3) {
                child = child.concurrencyKey("ck" + random.nextInt(6));
            }
            children.add(child);
        }
        return children;
    }

    private <S> Mono<Outcome<S>> step(long id, String step, int attempt,
            java.util.function.Function<String, Outcome<S>> outcome) {
        return started(id, FLOW, step, attempt)
                .flatMap(token -> Mono.delay(Duration.ofMillis(5 + ThreadLocalRandom.current().nextInt(60)))
                        .then(ended(token, "ok"))
                        .then(Mono.fromCallable(() -> outcome.apply(token))));
    }

    /** Records the start of an execution and emits its token; an error when it cannot be recorded. */
    private Mono<String> started(long id, String type, String step, int attempt) {
        String token = UUID.randomUUID().toString();
        return execute("INSERT INTO \"" + schema + "\".chaos_exec (token, instance_id, type, step, attempt, label,"
                + " started_at) VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())",
                token, id, type, step, attempt, label)
                .thenReturn(token);
    }

    /** Best effort: the end time is informative, the checker does not rely on it. */
    private Mono<Void> ended(String token, String outcome) {
        return execute("UPDATE \"" + schema + "\".chaos_exec SET ended_at = clock_timestamp(), outcome = $2"
                + " WHERE token = $1", token, outcome)
                .onErrorResume(error -> Mono.empty());
    }

    private Mono<Void> execute(String sql, Object... args) {
        return Flux.usingWhen(recorder.create(), (Connection c) -> {
                    var statement = c.createStatement(sql);
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated);
                }, Connection::close)
                .then();
    }
}
