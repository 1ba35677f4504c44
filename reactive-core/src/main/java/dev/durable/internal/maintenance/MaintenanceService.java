package dev.durable.internal.maintenance;

import dev.durable.DurableTimeoutException;
import dev.durable.Maintenance.TaskOptions;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * One maintenance task as a service of its own: on each tick of its interval it runs one pass, a
 * batch at a time through the engine's {@link Lane}, taking another batch while the last came back
 * full and the pass's budget lasts. So a task keeps up with any rate its batches can sustain, not a
 * fixed number of rows per tick, and yields the lane between batches. Every batch is bounded by the
 * task's timeout (the subclass also bounds its statements by it on the server). A pass that fails
 * is counted and logged, and the next tick tries again; it never stops another task's ticks. Ticks
 * that come while a pass runs are dropped.
 */
public abstract class MaintenanceService {

    private static final Logger log = Loggers.getLogger(MaintenanceService.class);

    private final String task;
    private final TaskOptions options;
    private final Lane lane;
    private final Scheduler timer;
    private final AtomicLong handled = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private final @Nullable Counter rows;
    private final Counter failed;
    private volatile @Nullable Disposable ticks;

    /**
     * @param task the task's name in logs and the {@code task} tag of {@code durable.maintenance.failures}
     * @param rowsMeter the counter of rows handled, or null when another meter counts them already
     */
    protected MaintenanceService(String task, TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters,
            @Nullable String rowsMeter) {
        this.task = task;
        this.options = options;
        this.lane = lane;
        this.timer = timer;
        this.rows = rowsMeter == null ? null : meters.counter(rowsMeter);
        this.failed = Counter.builder("durable.maintenance.failures").tag("task", task)
                .description("maintenance passes that failed or timed out").register(meters);
    }

    /**
     * One batch of at most {@code limit} rows whose statements are bounded by {@code timeout}; emits
     * how many rows it handled, once its transaction committed.
     */
    protected abstract Mono<Long> batch(int limit, Duration timeout);

    /** Whether a batch that handled {@code count} rows may have left more to do. */
    protected boolean full(long count) {
        return count >= options.batchSize();
    }

    public final String task() {
        return task;
    }

    public final TaskOptions options() {
        return options;
    }

    /** Rows handled so far, by ticks and passes run by hand. */
    public final long handled() {
        return handled.get();
    }

    /** Passes that failed so far. */
    public final long failures() {
        return failures.get();
    }

    /** One pass now: batches while they come back full and the budget lasts; emits the rows handled. */
    public final Mono<Long> pass() {
        return Mono.defer(() -> {
            long deadline = timer.now(TimeUnit.NANOSECONDS) + options.budget().toNanos();
            return oneBatch()
                    .expand(count -> full(count) && timer.now(TimeUnit.NANOSECONDS) < deadline ? oneBatch()
                            : Mono.empty())
                    .reduce(0L, Long::sum);
        }).doOnError(error -> {
            failures.incrementAndGet();
            failed.increment();
        });
    }

    private Mono<Long> oneBatch() {
        Duration timeout = options.timeout();
        return lane.run(Mono.defer(() -> batch(options.batchSize(), timeout)))
                .timeout(timeout, timer)
                .onErrorMap(java.util.concurrent.TimeoutException.class, error -> new DurableTimeoutException(
                        "maintenance task " + task + ": a batch took longer than " + timeout))
                .defaultIfEmpty(0L)
                .doOnNext(count -> {
                    handled.addAndGet(count);
                    if (rows != null && count > 0) {
                        rows.increment(count);
                    }
                });
    }

    /** Runs a pass on every tick until {@link #stop()}, when the task is switched on. */
    public final void start() {
        if (!options.enabled() || ticks != null) {
            return;
        }
        ticks = Flux.interval(options.interval(), timer)
                .onBackpressureDrop()
                .concatMap(tick -> pass().onErrorResume(error -> {
                    log.warn("maintenance task {} failed, its next tick tries again: {}", task, error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(count -> {
                    if (count > 0) {
                        log.debug("maintenance task {} handled {} rows", task, count);
                    }
                }, error -> log.error("maintenance task " + task + " stopped", error));
    }

    public final void stop() {
        Disposable running = ticks;
        if (running != null) {
            running.dispose();
        }
    }
}
