package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.handler.BlockingScheduler;
import dev.durable.internal.handler.HandlerWatch;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Hooks;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Every handler shape a WebFlux team brings (Mono, any Publisher, CompletableFuture, blocking code)
 * gets the same guarantees: results, retries, permanent failures, cancellation. Blocking handlers
 * never run on the engine's handler scheduler, even when that is {@code parallel()}. Runs again on
 * JDK 25 in the build when it is installed, where blocking handlers get virtual threads.
 */
@ExtendWith(PostgresExtension.class)
class HandlerShapesIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private final List<Throwable> dropped = new java.util.concurrent.CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp(TestDatabase database) {
        engines.on(database);
        Hooks.onErrorDropped(dropped::add);
    }

    @AfterEach
    void nothingDropped() {
        Hooks.resetOnErrorDropped();
        assertThat(dropped).as("errors dropped").isEmpty();
    }

    /** An engine whose reactive handlers run on parallel(): the fast path, where blocking is a trap. */
    private DurableEngine engine(String queue, int concurrency, Definition... definitions) {
        return engines.start(engines.options("shapes-" + queue)
                .handlerScheduler(Schedulers.parallel())
                .queue(QueueOptions.builder(queue).concurrency(concurrency).pollInterval(Duration.ofMillis(100))
                        .build()), definitions);
    }

    private static String result(DurableEngine engine, long id) {
        Instance done = engine.awaitSettled(id, WAIT).block();
        assertThat(done.status()).as("instance %s: %s", id, done.lastError()).isEqualTo(InstanceStatus.DONE);
        return done.resultJson();
    }

    @Test
    void everyShapeCompletesWithItsResult() {
        DurableEngine engine = engine("results", 4,
                JobDefinition.of("mono", String.class, (String s) -> Mono.just("mono " + s)).queue("results"),
                JobDefinition.ofPublisher("flux", String.class, (String s) -> Flux.just("first", "last " + s))
                        .queue("results"),
                JobDefinition.ofFuture("future", String.class,
                        (String s) -> CompletableFuture.supplyAsync(() -> "future " + s)).queue("results"),
                JobDefinition.ofBlocking("blocking", String.class, (String s) -> {
                    Thread.sleep(20);
                    return "blocking " + s + " on " + (isVirtual(Thread.currentThread()) ? "virtual" : "platform");
                }).queue("results"),
                JobDefinition.of("context", String.class, JobHandler.<String, String>blocking(
                        (s, context) -> s + " attempt " + context.attempt())).queue("results"),
                JobDefinition.ofBlocking("nothing", String.class, (String s) -> null).queue("results"));
        String thread = BlockingScheduler.virtual() ? "virtual" : "platform";
        assertThat(result(engine, engine.insert(JobRequest.of("mono", "a")).block())).isEqualTo("\"mono a\"");
        assertThat(result(engine, engine.insert(JobRequest.of("flux", "b")).block())).isEqualTo("\"last b\"");
        assertThat(result(engine, engine.insert(JobRequest.of("future", "c")).block())).isEqualTo("\"future c\"");
        assertThat(result(engine, engine.insert(JobRequest.of("blocking", "d")).block()))
                .isEqualTo("\"blocking d on " + thread + "\"");
        assertThat(result(engine, engine.insert(JobRequest.of("context", "e")).block())).isEqualTo("\"e attempt 1\"");
        assertThat(result(engine, engine.insert(JobRequest.of("nothing", "f")).block())).isNull();
        assertThat(BlockingScheduler.virtual()).isEqualTo(Runtime.version().feature() >= 21);
        if (Boolean.getBoolean("durable.expectVirtualThreads")) {
            assertThat(thread).isEqualTo("virtual");
        }
    }

    @Test
    void blockingHandlersRunTogetherOffTheHandlerScheduler() {
        // Eight handlers that each wait for all eight: on parallel()'s two threads they would never
        // meet. Declared blocking, they run side by side on the blocking scheduler.
        int runs = 8;
        CountDownLatch together = new CountDownLatch(runs);
        Set<Long> threads = ConcurrentHashMap.newKeySet();
        Set<String> names = ConcurrentHashMap.newKeySet();
        DurableEngine engine = engine("meet", runs, JobDefinition.ofBlocking("meet", Integer.class, (Integer i) -> {
            threads.add(Thread.currentThread().getId());
            names.add(Thread.currentThread().getName());
            together.countDown();
            return together.await(50, TimeUnit.SECONDS) ? "met" : "alone";
        }).queue("meet"));
        List<Long> ids = engine.insertAll(IntStream.range(0, runs).mapToObj(i -> JobRequest.of("meet", i)).toList())
                .block();
        for (long id : ids) {
            assertThat(result(engine, id)).isEqualTo("\"met\"");
        }
        assertThat(threads).hasSize(runs);
        assertThat(names).noneMatch(name -> name.startsWith("parallel-"));
    }

    @Test
    void failuresOfEveryShapeRetryOrFailForGood() {
        DurableEngine engine = engine("errors", 4,
                JobDefinition.ofBlocking("blocking-permanent", String.class, (String s) -> {
                    throw new PermanentFailureException("no such mailbox " + s);
                }).queue("errors"),
                JobDefinition.ofFuture("future-permanent", String.class, (String s) ->
                        CompletableFuture.<String>failedFuture(new PermanentFailureException("refused " + s)))
                        .queue("errors"),
                JobDefinition.ofBlocking("blocking-flaky", String.class, (String s) -> {
                    throw new java.io.IOException("io " + s);
                }).queue("errors").maxAttempts(2).backoff(Backoff.fixed(Duration.ofMillis(10))),
                JobDefinition.<String, String>of("null-mono", String.class, (String s) -> null).queue("errors")
                        .maxAttempts(1));
        Instance permanent = engine.awaitSettled(engine.insert(JobRequest.of("blocking-permanent", "x")).block(), WAIT)
                .block();
        assertThat(permanent.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(permanent.attempt()).isEqualTo(1);
        assertThat(permanent.lastError()).contains("no such mailbox x");
        Instance refused = engine.awaitSettled(engine.insert(JobRequest.of("future-permanent", "y")).block(), WAIT)
                .block();
        assertThat(refused.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(refused.attempt()).isEqualTo(1);
        assertThat(refused.lastError()).contains("refused y");
        Instance flaky = engine.awaitSettled(engine.insert(JobRequest.of("blocking-flaky", "z")).block(), WAIT).block();
        assertThat(flaky.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(flaky.attempt()).isEqualTo(2);
        assertThat(flaky.lastError()).contains("java.io.IOException: io z");
        Instance nullMono = engine.awaitSettled(engine.insert(JobRequest.of("null-mono", "w")).block(), WAIT).block();
        assertThat(nullMono.status()).isEqualTo(InstanceStatus.FAILED);
        assertThat(nullMono.lastError()).contains("returned null instead of a Mono");
    }

    @Test
    void aCancelledBlockingHandlerIsInterrupted() {
        CountDownLatch started = new CountDownLatch(1);
        AtomicBoolean interrupted = new AtomicBoolean();
        DurableEngine engine = engine("cancel", 2, JobDefinition.ofBlocking("sleepy", String.class, (String s) -> {
            started.countDown();
            try {
                Thread.sleep(WAIT.toMillis());
            } catch (InterruptedException stopped) {
                interrupted.set(true);
                throw stopped;
            }
            return "woke";
        }).queue("cancel"));
        long id = engine.insert(JobRequest.of("sleepy", "x")).block();
        Eventually.until("the handler started", WAIT, () -> started.getCount() == 0);
        assertThat(engine.cancel(id).block()).isEqualTo(CancelResult.REQUESTED);
        assertThat(engine.awaitSettled(id, WAIT).block().status()).isEqualTo(InstanceStatus.CANCELLED);
        Eventually.until("the handler's thread was interrupted", WAIT, interrupted::get);
    }

    @Test
    void workflowStepsMayBlockOrReturnFutures() {
        DurableEngine engine = engine("steps", 2, WorkflowDefinition.builder("shapes", Integer.class)
                .queue("steps")
                .step("blocking", StepHandler.blocking(context -> {
                    Thread.sleep(10);
                    return Outcome.next("future", context.state() + 1);
                }))
                .step("future", StepHandler.future(context ->
                        CompletableFuture.supplyAsync(() -> Outcome.<Integer>done(context.state() * 10))))
                .build());
        assertThat(result(engine, engine.insert(JobRequest.of("shapes", 4)).block())).isEqualTo("50");
    }

    @Test
    void aReactiveHandlerThatBlocksAParallelThreadIsWarnedAbout() {
        DurableEngine engine = engine("warned", 2, JobDefinition.of("sleeper", String.class, (String s) ->
                Mono.fromCallable(() -> {
                    Thread.sleep(HandlerWatch.THRESHOLD.toMillis() * 2);
                    return "slept";
                })).queue("warned"));
        assertThat(result(engine, engine.insert(JobRequest.of("sleeper", "x")).block())).isEqualTo("\"slept\"");
        // Said once the handler's subscribe returned on its thread, which may come after the commit is seen.
        Eventually.until("the warning", WAIT, () -> HandlerWatch.warnedAbout("the handler of job type 'sleeper'"));
    }

    private static boolean isVirtual(Thread thread) {
        try {
            return (Boolean) Thread.class.getMethod("isVirtual").invoke(thread);
        } catch (ReflectiveOperationException olderJdk) {
            return false;
        }
    }
}
