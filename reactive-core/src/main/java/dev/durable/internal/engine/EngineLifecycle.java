package dev.durable.internal.engine;

import dev.durable.EngineClosedException;
import dev.durable.internal.Cleanup;
import dev.durable.internal.client.ClientWarnings;
import dev.durable.internal.client.LocalQueues;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.limit.Limiter;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Where an engine is in its life: not started, starting, running (its {@link EngineRuntime}), closing.
 * A start is shared by every caller until it ends; a failed one is forgotten, so a later start
 * tries again from scratch. A close is shared too, and final: from it on the client's calls fail
 * with {@link EngineClosedException}. While running, the local schedulers take inserted rows and the
 * registry knows the fleet ({@link LocalQueues}); otherwise nothing is claimed and a client asks.
 */
public final class EngineLifecycle implements LocalQueues {

    private static final Logger log = Loggers.getLogger(EngineLifecycle.class);

    /**
     * The state, swapped as one value: the start in flight or done (null before the first start,
     * and again after a failed one), the runtime it made (null until a start succeeds), and the
     * close once asked for.
     */
    private record State(@Nullable Mono<Void> starting, @Nullable EngineRuntime runtime, @Nullable Mono<Void> closing) {

        static final State NEW = new State(null, null, null);

        State starting(@Nullable Mono<Void> start) {
            return new State(start, runtime, closing);
        }

        State running(EngineRuntime started) {
            return new State(starting, started, closing);
        }

        State closing(Mono<Void> close) {
            return new State(starting, runtime, close);
        }
    }

    private final String engine;
    private final Supplier<Mono<EngineRuntime>> startRuntime;
    private final Mono<Void> flushInserts;
    private final Mono<Void> closeConnections;
    private final ClientWarnings clientWarnings;
    private final AtomicReference<State> state = new AtomicReference<>(State.NEW);

    /**
     * {@code startRuntime} migrates and makes the runtime; a close flushes the insert buffer, closes the
     * runtime, then the connections, each step run whatever the one before did.
     */
    public EngineLifecycle(String engine, Supplier<Mono<EngineRuntime>> startRuntime, Mono<Void> flushInserts,
            Mono<Void> closeConnections, ClientWarnings clientWarnings) {
        this.engine = engine;
        this.startRuntime = startRuntime;
        this.flushInserts = flushInserts;
        this.closeConnections = closeConnections;
        this.clientWarnings = clientWarnings;
    }

    /** Starts the engine, once: every caller shares the start in flight or done. */
    public Mono<Void> start() {
        for (;;) {
            State now = state.get();
            if (now.closing() != null) {
                return Mono.error(new EngineClosedException(engine));
            }
            if (now.starting() != null) {
                return now.starting();
            }
            // A failed start (the database down at boot, say) has undone what it began and is
            // forgotten, so a later start() tries again from scratch instead of replaying the failure.
            AtomicReference<Mono<Void>> self = new AtomicReference<>();
            Mono<Void> starting = Mono.defer(this::doStart)
                    .doOnError(error -> state.getAndUpdate(current -> current.starting() == self.get()
                            ? current.starting(null) : current))
                    .cache();
            self.set(starting);
            if (state.compareAndSet(now, now.starting(starting))) {
                return starting;
            }
        }
    }

    private Mono<Void> doStart() {
        return startRuntime.get().flatMap(runtime -> {
            State now = state.updateAndGet(current -> current.running(runtime));
            // A close that stopped waiting for this start may have missed the runtime: close it here.
            return now.closing() == null ? Mono.<Void>empty()
                    : runtime.close().then(Mono.error(new EngineClosedException(engine)));
        });
    }

    /** The close, shared by every caller; it runs when subscribed. */
    public Mono<Void> closeLater() {
        for (;;) {
            State now = state.get();
            if (now.closing() != null) {
                return now.closing();
            }
            Mono<Void> closing = Mono.defer(this::doClose).cache();
            if (state.compareAndSet(now, now.closing(closing))) {
                return closing;
            }
        }
    }

    private Mono<Void> doClose() {
        Mono<Void> inFlight = state.get().starting();
        // A start stalled on the database is not waited for past one close step: it closes what it
        // made itself when it sees the engine closing.
        Mono<Void> started = inFlight == null ? Mono.empty()
                : inFlight.timeout(QueueScheduler.CLOSE_STEP, Mono.empty()).onErrorResume(error -> Mono.empty());
        Mono<Void> runtime = Mono.defer(() -> {
            EngineRuntime made = state.get().runtime();
            return made == null ? Mono.empty() : made.close();
        });
        return started
                .then(Cleanup.inOrder(List.of(flushInserts.timeout(QueueScheduler.CLOSE_STEP, Mono.empty()), runtime,
                        closeConnections)))
                .doOnSuccess(closed -> log.info("Durable engine {} closed", engine));
    }

    /** Empty while the engine is open; an {@link EngineClosedException} once its close was asked for. */
    public Mono<Void> whenOpen() {
        return Mono.defer(() -> state.get().closing() == null ? Mono.empty()
                : Mono.error(new EngineClosedException(engine)));
    }

    /** The runtime a start made, or null before one succeeded (it stays after the close, closed). */
    public @Nullable EngineRuntime runtime() {
        return state.get().runtime();
    }

    /** The limiter of the runtime a start made; null before one succeeded (permits then wait or fail). */
    public @Nullable Limiter runningLimiter() {
        EngineRuntime running = runtime();
        return running == null ? null : running.limiter();
    }

    /** Started and not closing. */
    public boolean running() {
        State now = state.get();
        return now.runtime() != null && now.closing() == null;
    }

    @Override
    public ClaimOnInsert.Plan claims(List<NewInstance> rows) {
        State now = state.get();
        return now.runtime() == null || now.closing() != null ? ClaimOnInsert.none(rows)
                : now.runtime().claims().plan(rows);
    }

    @Override
    public Mono<Void> warnIfUnserved(List<String> queues) {
        EngineRuntime runtime = runtime();
        if (runtime != null) {
            runtime.registry().warnIfUnserved(queues);
            return Mono.empty();
        }
        return clientWarnings.inserted(queues);
    }
}
