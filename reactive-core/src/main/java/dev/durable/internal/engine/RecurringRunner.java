package dev.durable.internal.engine;

import dev.durable.DuplicateCorrelationKeyException;
import dev.durable.JobRequest;
import dev.durable.RecurringJob;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiFunction;
import java.util.function.Function;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Keeps the next run of every recurring job inserted. Each tick reads the database clock, computes
 * each schedule's next due time and, when that differs from the one this engine last ensured,
 * inserts it; a duplicate means another node (or an earlier tick) got there first.
 */
public final class RecurringRunner {

    private static final Logger log = Loggers.getLogger(RecurringRunner.class);

    private final List<RecurringJob> jobs;
    private final Duration interval;
    private final Mono<Instant> databaseNow;
    private final Function<JobRequest, Mono<Long>> insert;
    private final BiFunction<RecurringJob, Long, JobRequest> dueRequest;
    private final Map<String, Long> ensured = new ConcurrentHashMap<>();
    private Disposable ticks = Disposables.disposed();

    public RecurringRunner(List<RecurringJob> jobs, Duration interval, Mono<Instant> databaseNow,
            Function<JobRequest, Mono<Long>> insert, BiFunction<RecurringJob, Long, JobRequest> dueRequest) {
        this.jobs = jobs;
        this.interval = interval;
        this.databaseNow = databaseNow;
        this.insert = insert;
        this.dueRequest = dueRequest;
    }

    public void start() {
        if (jobs.isEmpty()) {
            return;
        }
        ticks = Flux.interval(Duration.ZERO, interval)
                .onBackpressureDrop()
                .concatMap(tick -> ensureNext().onErrorResume(error -> {
                    log.warn("recurring jobs not checked this tick: {}", error.toString());
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> log.error("recurring job loop failed", error));
    }

    /** One pass: the next due run of every schedule exists afterwards. */
    public Mono<Void> ensureNext() {
        return databaseNow.flatMapMany(now -> Flux.fromIterable(jobs).concatMap(job -> {
                    long due = job.cron().next(now.atZone(job.zone())).toEpochSecond();
                    Long last = ensured.get(job.name());
                    if (last != null && last == due) {
                        return Mono.empty();
                    }
                    return insert.apply(dueRequest.apply(job, due))
                            .then()
                            .onErrorResume(DuplicateCorrelationKeyException.class, taken -> Mono.empty())
                            .doOnSuccess(done -> ensured.put(job.name(), due))
                            // One broken schedule (say, of a type nobody registered) must not stop the others.
                            .onErrorResume(error -> {
                                log.warn("recurring job {} not inserted for {}: {}", job.name(),
                                        Instant.ofEpochSecond(due), error.toString());
                                return Mono.empty();
                            });
                }))
                .then();
    }

    public void stop() {
        ticks.dispose();
    }
}
