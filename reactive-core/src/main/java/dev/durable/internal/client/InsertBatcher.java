package dev.durable.internal.client;

import dev.durable.EngineClosedException;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.Rows.NewInstance;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The buffer behind {@code insertAsync}: requests, already checked, wait in memory until
 * {@code batchSize} of them are there or the oldest has waited {@code delay}, then go in one
 * insert (one round trip), at most {@link #FLUSHES_IN_FLIGHT} at a time; each caller gets its id
 * when its flush commits. At most {@code capacity} requests are held (buffered or in flight): a
 * request beyond that is inserted directly on its own, so none is dropped and no caller waits for
 * room. {@link #drain()} stops taking requests and flushes what is held.
 *
 * <p>A flush the database refuses (a taken correlation key, say) rolled back whole, so its requests
 * are inserted again one by one, and each caller gets its own answer. A flush that fails otherwise
 * (a lost connection, its timeout) may or may not have committed: its callers get that error, and
 * nothing is inserted twice.
 */
public final class InsertBatcher {

    private static final Logger log = Loggers.getLogger(InsertBatcher.class);

    /** Flushes at once; more would only queue for the pool's connections behind each other. */
    static final int FLUSHES_IN_FLIGHT = 2;

    private record Pending(NewInstance row, MonoSink<Long> sink) {
    }

    /**
     * How the buffer behaves: the engine it belongs to (named when a request comes after the close),
     * the flush size and delay, the most requests held, and the scheduler of the delay's timer.
     */
    public record Settings(String engine, int batchSize, Duration delay, int capacity, Scheduler timer) {
    }

    private final String engine;
    private final Function<List<NewInstance>, Mono<List<Long>>> insert;
    private final int batchSize;
    private final Duration delay;
    private final int capacity;
    private final Scheduler timer;

    // Guarded by this; no I/O and no completion of a caller happens while it is held.
    private final ArrayDeque<Pending> buffer = new ArrayDeque<>();
    private int held;
    private int flushing;
    private boolean closed;
    private boolean overdue;
    private Disposable delayTimer = Disposables.disposed();

    private final Sinks.Empty<Void> drained = Sinks.empty();

    /** {@code insert} inserts rows in one round trip and emits their ids in order. */
    InsertBatcher(Settings settings, Function<List<NewInstance>, Mono<List<Long>>> insert) {
        this.engine = settings.engine();
        this.insert = insert;
        this.batchSize = settings.batchSize();
        this.delay = settings.delay();
        this.capacity = settings.capacity();
        this.timer = settings.timer();
    }

    /** Inserts a checked row with the next flush, or directly when the buffer is full; emits its id. */
    public Mono<Long> insert(NewInstance row) {
        return Mono.create(sink -> {
            List<List<Pending>> ready;
            boolean direct = false;
            boolean refused = false;
            synchronized (this) {
                if (closed) {
                    refused = true;
                    ready = List.of();
                } else if (held >= capacity) {
                    direct = true;
                    ready = List.of();
                } else {
                    buffer.add(new Pending(row, sink));
                    held++;
                    if (buffer.size() == 1) {
                        armDelay();
                    }
                    ready = takeReady();
                }
            }
            if (refused) {
                sink.error(new EngineClosedException(engine));
            } else if (direct) {
                insert.apply(List.of(row)).map(ids -> ids.get(0)).subscribe(sink::success, sink::error);
            } else {
                ready.forEach(this::flush);
            }
        });
    }

    /**
     * Stops taking requests and flushes every held one at once; completes when the last flush has
     * answered (each is bounded by the engine's call timeout). Idempotent.
     */
    public Mono<Void> drain() {
        return Mono.defer(() -> {
            List<List<Pending>> ready;
            boolean empty;
            synchronized (this) {
                closed = true;
                delayTimer.dispose();
                ready = takeReady();
                empty = held == 0;
            }
            ready.forEach(this::flush);
            if (empty) {
                drained.tryEmitEmpty();
            }
            return drained.asMono();
        });
    }

    /** Requests held now, buffered or in flight (for tests and meters). */
    public synchronized int held() {
        return held;
    }

    /** The batches that may go now: full ones, or any once the delay passed or on drain, within the flush limit. */
    private List<List<Pending>> takeReady() {
        List<List<Pending>> ready = new ArrayList<>(1);
        while (flushing < FLUSHES_IN_FLIGHT && !buffer.isEmpty()
                && (buffer.size() >= batchSize || overdue || closed)) {
            List<Pending> batch = new ArrayList<>(Math.min(buffer.size(), batchSize));
            while (batch.size() < batchSize && !buffer.isEmpty()) {
                batch.add(buffer.poll());
            }
            flushing++;
            ready.add(batch);
        }
        if (buffer.isEmpty()) {
            overdue = false;
            delayTimer.dispose();
        } else if (!overdue && ready.size() > 0) {
            // What stays behind a full batch starts its own wait.
            armDelay();
        }
        return ready;
    }

    private void armDelay() {
        delayTimer.dispose();
        if (closed) {
            return;
        }
        delayTimer = Mono.delay(delay, timer).subscribe(tick -> {
            List<List<Pending>> ready;
            synchronized (this) {
                overdue = true;
                ready = takeReady();
            }
            ready.forEach(this::flush);
        }, error -> log.warn("insert buffer timer failed: {}", error.toString()));
    }

    private void flush(List<Pending> batch) {
        insertTogether(batch)
                .doFinally(signal -> flushed(batch.size()))
                .subscribe(null, error -> log.error("insert flush failed unexpectedly", error));
    }

    /**
     * Inserts the batch in one round trip and answers each caller. A batch the database refused
     * was rolled back whole: its requests go again one by one, so only the refused one fails.
     */
    private Mono<Void> insertTogether(List<Pending> batch) {
        List<NewInstance> rows = new ArrayList<>(batch.size());
        for (Pending pending : batch) {
            rows.add(pending.row());
        }
        // The insert is a database call, bounded like every other (DatabaseTimeoutException).
        return insert.apply(rows)
                .doOnNext(ids -> {
                    for (int i = 0; i < batch.size(); i++) {
                        batch.get(i).sink().success(ids.get(i));
                    }
                })
                .then()
                .onErrorResume(error -> {
                    if (batch.size() > 1 && Errors.isRefusedOutcome(error)) {
                        return Flux.fromIterable(batch).concatMap(pending -> insertTogether(List.of(pending))).then();
                    }
                    if (batch.size() > 1) {
                        log.warn("insert flush of {} requests failed: {}", batch.size(), error.toString());
                    }
                    batch.forEach(pending -> pending.sink().error(error));
                    return Mono.empty();
                });
    }

    private void flushed(int rows) {
        List<List<Pending>> ready;
        boolean done;
        synchronized (this) {
            held -= rows;
            flushing--;
            ready = takeReady();
            done = closed && held == 0;
        }
        ready.forEach(this::flush);
        if (done) {
            drained.tryEmitEmpty();
        }
    }
}
