package dev.durable.internal.engine;

import dev.durable.internal.Errors;
import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.Rows.Transition;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import reactor.core.Exceptions;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * Group commit of outcomes. An outcome that arrives while fewer than {@code parallelism} batches
 * are in flight is committed at once (no added latency when quiet); outcomes that arrive while
 * batches are in flight queue up and go together in the next one, up to {@code batchSize}. So the
 * batch grows with load and a batch never waits longer than one commit ahead of it. A batch of
 * plain outcomes is one statement; one with riders (parks, consumed signals, children, settled
 * children) is one transaction of a fixed set of statements ({@link OutcomeCommit}).
 */
final class OutcomeCommitter {

    private static final Logger log = Loggers.getLogger(OutcomeCommitter.class);

    private record Pending(OutcomeRow row, MonoSink<Optional<Transition>> sink) {
    }

    private final OutcomeCommit outcomeCommit;
    private final Transitions transitions;
    private final int batchSize;
    private final int parallelism;
    private final Queue<Pending> queue = new ConcurrentLinkedQueue<>();
    private final AtomicInteger inFlight = new AtomicInteger();
    /** True on a thread that runs a batch of runs: their outcomes wait for {@link #flush} to go together. */
    private final BooleanSupplier holding;

    OutcomeCommitter(OutcomeCommit outcomeCommit, int batchSize, int parallelism, Transitions transitions,
            BooleanSupplier holding) {
        this.outcomeCommit = outcomeCommit;
        this.holding = holding;
        this.transitions = transitions;
        this.batchSize = batchSize;
        this.parallelism = parallelism;
    }

    /**
     * Commits one outcome with the batch it lands in. Emits the row's transition, or empty when the
     * outcome was stale (the worker no longer owned the row).
     */
    Mono<Optional<Transition>> commit(OutcomeRow row) {
        return Mono.create(sink -> {
            queue.add(new Pending(row, sink));
            if (!holding.getAsBoolean()) {
                drain();
            }
        });
    }

    /** Commits what waits (the outcomes a batch of runs held back). */
    void flush() {
        drain();
    }

    private void drain() {
        for (;;) {
            int current = inFlight.get();
            if (current >= parallelism || queue.isEmpty()) {
                return;
            }
            if (!inFlight.compareAndSet(current, current + 1)) {
                continue;
            }
            List<Pending> batch = new ArrayList<>(Math.min(batchSize, 64));
            Pending next;
            while (batch.size() < batchSize && (next = queue.poll()) != null) {
                batch.add(next);
            }
            if (batch.isEmpty()) {
                inFlight.decrementAndGet();
                continue;
            }
            commitBatch(batch);
        }
    }

    private void commitBatch(List<Pending> batch) {
        commitTogether(batch)
                .doFinally(signal -> {
                    inFlight.decrementAndGet();
                    drain();
                })
                .subscribe(null, error -> log.error("outcome commit failed unexpectedly", error));
    }

    private Mono<Void> commitTogether(List<Pending> batch) {
        List<OutcomeRow> rows = new ArrayList<>(batch.size());
        for (Pending pending : batch) {
            rows.add(pending.row());
        }
        return outcomeCommit.commit(rows)
                // A lost connection may hide a commit that went through: a retry then finds the
                // rows no longer claimed and reports them stale, which is the truth.
                .retryWhen(Retry.backoff(3, Duration.ofMillis(50)).filter(Errors::isTransient))
                .doOnNext(committed -> complete(batch, committed))
                .then()
                .onErrorResume(error -> {
                    if (batch.size() > 1 && (Errors.isExecutingKeyTaken(error)
                            || !(Exceptions.isRetryExhausted(error) || Errors.isTransient(error)))) {
                        // One outcome the database refused (an inline step took a concurrency key that
                        // is executing elsewhere, a child's correlation key is taken...) rolled the
                        // whole transaction back: commit each alone, so only that one fails.
                        return Flux.fromIterable(batch).concatMap(pending -> commitTogether(List.of(pending))).then();
                    }
                    fail(batch, error);
                    return Mono.empty();
                });
    }

    private void complete(List<Pending> batch, OutcomeCommit.Committed committed) {
        Map<Long, Transition> byId = new HashMap<>();
        for (Transition transition : committed.transitions()) {
            byId.put(transition.id(), transition);
        }
        for (Pending pending : batch) {
            pending.sink().success(Optional.ofNullable(byId.get(pending.row().id())));
        }
        committed.wokenParents().forEach(transitions::wokenParent);
        committed.spawned().forEach(transitions::spawned);
    }

    private static void fail(List<Pending> batch, Throwable error) {
        if (batch.size() == 1 && (Errors.isExecutingKeyTaken(error) || Errors.isRefusedOutcome(error))) {
            // A refusal its run answers with another outcome (through the queue, or failed with the
            // reason), logging what it could not commit: no warning here.
            log.debug("outcome of instance {} refused: {}", batch.get(0).row().id(), error.toString());
        } else {
            log.warn("commit of {} outcomes failed; their rows return through the reaper: {}",
                    batch.size(), error.toString());
        }
        for (Pending pending : batch) {
            pending.sink().error(error);
        }
    }
}
