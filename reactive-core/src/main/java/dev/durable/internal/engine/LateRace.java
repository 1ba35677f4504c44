package dev.durable.internal.engine;

import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.AtomicReferenceFieldUpdater;
import java.util.function.LongFunction;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.CoreSubscriber;
import reactor.core.Disposable;
import reactor.core.Exceptions;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Schedulers;
import reactor.util.context.Context;

/**
 * A Mono raced against a trigger (a timeout, a stop) that is armed only if the Mono did not end
 * while it was being subscribed to. A handler that answers at once (a no-op, a cached value, a
 * computation) is most runs; it then costs no timer and no subscription to the stop signal. When
 * the trigger wins, the source is cancelled and the race ends with what {@code onTrigger} answers
 * (its value, or the error it throws), as {@code Mono.timeout} and {@code Mono.firstWithSignal} do.
 *
 * <p>Only on a non-blocking thread: there the source's subscribe cannot block. On a thread that may
 * block (bounded elastic, a virtual thread) a handler may block inside its subscribe, and a trigger
 * armed after it would never fire while it blocks; there the race is the plain operator
 * ({@code Mono.timeout}; for a stop, {@code Mono.firstWithSignal} with the stop subscribed before
 * the source, so a cancel or a lost claim ends the run while its handler still blocks).
 */
final class LateRace<T> extends Mono<T> {

    private final Mono<T> source;
    /** The trigger, made only when needed; given the nanoseconds since the subscribe began. */
    private final LongFunction<Mono<?>> trigger;
    private final Callable<T> onTrigger;
    /** For a timeout: a source that ended at once but took this long or more still timed out. */
    private final long deadlineNanos;
    /** The same race with its trigger armed before the source, for threads that may block. */
    private final Supplier<Mono<T>> armedFirst;

    private LateRace(Mono<T> source, LongFunction<Mono<?>> trigger, Callable<T> onTrigger,
            long deadlineNanos, Supplier<Mono<T>> armedFirst) {
        this.source = source;
        this.trigger = trigger;
        this.onTrigger = onTrigger;
        this.deadlineNanos = deadlineNanos;
        this.armedFirst = armedFirst;
    }

    /**
     * Like {@code source.timeout(timeout)} (the error is a {@link TimeoutException}, the timer on
     * Reactor's parallel scheduler), with no timer for a source that ends at once within the timeout.
     */
    static <T> Mono<T> timeout(Mono<T> source, Duration timeout) {
        long nanos = timeout.toNanos();
        return new LateRace<>(source, elapsed -> Mono.delay(Duration.ofNanos(Math.max(0L, nanos - elapsed)),
                Schedulers.parallel()), () -> {
                    throw new TimeoutException("Did not observe any item or terminal signal within "
                            + timeout.toMillis() + "ms");
                }, nanos, () -> source.timeout(timeout, Schedulers.parallel()));
    }

    /**
     * Ends with {@code onStop}'s answer once {@code stop} signals (its value or completion), unless
     * the source ended first; {@code stop} is subscribed to only if the source did not end at once.
     */
    static <T> Mono<T> until(Mono<T> source, Mono<?> stop, Callable<T> onStop) {
        return new LateRace<>(source, elapsed -> stop, onStop, -1L,
                () -> Mono.firstWithSignal(stop.then(Mono.fromCallable(onStop)), source));
    }

    @Override
    public void subscribe(CoreSubscriber<? super T> actual) {
        if (!Schedulers.isInNonBlockingThread()) {
            armedFirst.get().subscribe(actual);
            return;
        }
        long started = deadlineNanos >= 0 ? System.nanoTime() : 0L;
        Race<T> race = new Race<>(actual, onTrigger, deadlineNanos, started);
        source.subscribe(race);
        if (!race.isDone()) {
            race.arm(trigger.apply(deadlineNanos >= 0 ? System.nanoTime() - started : 0L));
        }
    }

    private static final class Race<T> implements CoreSubscriber<T>, org.reactivestreams.Subscription {

        @SuppressWarnings("rawtypes")
        private static final AtomicIntegerFieldUpdater<Race> DONE =
                AtomicIntegerFieldUpdater.newUpdater(Race.class, "done");
        @SuppressWarnings("rawtypes")
        private static final AtomicReferenceFieldUpdater<Race, Disposable> OTHER =
                AtomicReferenceFieldUpdater.newUpdater(Race.class, Disposable.class, "other");
        private static final Disposable ENDED = reactor.core.Disposables.disposed();

        private final CoreSubscriber<? super T> actual;
        private final Callable<T> onTrigger;
        private final long deadlineNanos;
        private final long started;
        private org.reactivestreams.@Nullable Subscription upstream;
        private volatile int done;
        /** The trigger's subscription: null until armed, ENDED once the race is over. */
        private volatile @Nullable Disposable other;

        private Race(CoreSubscriber<? super T> actual, Callable<T> onTrigger, long deadlineNanos, long started) {
            this.actual = actual;
            this.onTrigger = onTrigger;
            this.deadlineNanos = deadlineNanos;
            this.started = started;
        }

        boolean isDone() {
            return done != 0;
        }

        void arm(Mono<?> trigger) {
            Disposable armed = trigger.subscribe(value -> fire(), error -> fire(), this::fire);
            if (!OTHER.compareAndSet(this, null, armed)) {
                armed.dispose(); // the race ended meanwhile
            }
        }

        @Override
        public Context currentContext() {
            return actual.currentContext();
        }

        @Override
        public void onSubscribe(org.reactivestreams.Subscription subscription) {
            if (Operators.validate(upstream, subscription)) {
                upstream = subscription;
                actual.onSubscribe(this);
            }
        }

        /**
         * A source ending before the trigger was armed (at once) but after the deadline: it timed out,
         * as it would have with a timer running meanwhile.
         */
        private boolean lateAtOnce() {
            return deadlineNanos >= 0 && other == null && System.nanoTime() - started >= deadlineNanos;
        }

        @Override
        public void onNext(T value) {
            if (lateAtOnce()) {
                Operators.onDiscard(value, actual.currentContext());
                fire();
                return;
            }
            if (DONE.compareAndSet(this, 0, 1)) {
                endOther();
                actual.onNext(value);
                actual.onComplete();
            } else {
                Operators.onDiscard(value, actual.currentContext());
            }
        }

        @Override
        public void onError(Throwable error) {
            if (lateAtOnce()) {
                fire();
                return;
            }
            if (DONE.compareAndSet(this, 0, 1)) {
                endOther();
                actual.onError(error);
            } else {
                Operators.onErrorDropped(error, actual.currentContext());
            }
        }

        @Override
        public void onComplete() {
            if (lateAtOnce()) {
                fire();
                return;
            }
            if (DONE.compareAndSet(this, 0, 1)) {
                endOther();
                actual.onComplete();
            }
        }

        private void fire() {
            if (!DONE.compareAndSet(this, 0, 1)) {
                return;
            }
            endOther();
            org.reactivestreams.Subscription subscription = upstream;
            if (subscription != null) {
                subscription.cancel();
            }
            T value;
            try {
                value = onTrigger.call();
            } catch (Throwable error) {
                Exceptions.throwIfJvmFatal(error);
                actual.onError(error);
                return;
            }
            if (value != null) {
                actual.onNext(value);
            }
            actual.onComplete();
        }

        private void endOther() {
            Disposable armed = OTHER.getAndSet(this, ENDED);
            if (armed != null) {
                armed.dispose();
            }
        }

        @Override
        public void request(long n) {
            org.reactivestreams.Subscription subscription = upstream;
            if (subscription != null) {
                subscription.request(n);
            }
        }

        @Override
        public void cancel() {
            if (DONE.compareAndSet(this, 0, 1)) {
                endOther();
            }
            org.reactivestreams.Subscription subscription = upstream;
            if (subscription != null) {
                subscription.cancel();
            }
        }
    }
}
