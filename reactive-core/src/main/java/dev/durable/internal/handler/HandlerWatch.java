package dev.durable.internal.handler;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;
import reactor.core.Exceptions;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Runs a reactive handler and says so, once per type, when making or subscribing to its
 * {@code Mono} held a non-blocking thread (Reactor's parallel scheduler, an event loop) for long:
 * a {@code Thread.sleep} or a JDBC call there stalls every other run of that scheduler, with no
 * error anywhere. The check costs a clock read only on non-blocking threads.
 */
public final class HandlerWatch {

    private static final Logger log = Loggers.getLogger(HandlerWatch.class);
    /** Longer than any honest non-blocking assembly, shorter than a blocking call worth noticing. */
    public static final Duration THRESHOLD = Duration.ofMillis(100);
    private static final Set<String> warned = ConcurrentHashMap.newKeySet();

    private HandlerWatch() {
    }

    /** The handler's work, checked as described; a handler that throws or returns null fails the run. */
    public static <T> Mono<T> watched(String what, Supplier<? extends Publisher<T>> handler,
            boolean single) {
        return Mono.fromDirect(new Publisher<T>() {
            @Override
            public void subscribe(org.reactivestreams.Subscriber<? super T> subscriber) {
                boolean nonBlocking = Schedulers.isInNonBlockingThread();
                long started = nonBlocking ? System.nanoTime() : 0L;
                Publisher<T> work;
                try {
                    work = handler.get();
                } catch (Throwable error) {
                    Exceptions.throwIfJvmFatal(error);
                    Operators.error(subscriber, error);
                    return;
                }
                if (work == null) {
                    Operators.error(subscriber, new NullPointerException(what + " returned null instead of a "
                            + (single ? "Mono" : "Publisher")));
                    return;
                }
                work.subscribe(subscriber);
                if (nonBlocking) {
                    long took = System.nanoTime() - started;
                    if (took >= THRESHOLD.toNanos() && warned.add(what)) {
                        log.warn("{} held non-blocking thread {} for {} ms: blocking work there stalls every run"
                                        + " on that scheduler. Declare it blocking (JobDefinition.ofBlocking,"
                                        + " JobHandler.blocking, StepHandler.blocking: it then runs on {}), or run"
                                        + " handlers on a scheduler that may block (EngineOptions.handlerScheduler,"
                                        + " bounded-elastic by default). Said once per handler.",
                                what, Thread.currentThread().getName(), took / 1_000_000,
                                BlockingScheduler.virtual() ? "virtual threads" : "bounded-elastic threads");
                    }
                }
            }
        });
    }

    /** Whether {@code what} has been warned about (for tests). */
    public static boolean warnedAbout(String what) {
        return warned.contains(what);
    }
}
