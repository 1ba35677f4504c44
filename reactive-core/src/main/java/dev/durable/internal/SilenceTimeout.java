package dev.durable.internal;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.AtomicReferenceFieldUpdater;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.util.context.Context;

/**
 * {@code Flux.timeout(Duration)}'s rule (each answer, a row or the end, within the timeout of the one
 * before, the first counted from the subscribe) with one timer per call instead of one per row: the
 * timer, when it fires, looks at when the last row came and sleeps again for the rest if that was
 * recently. A call that returns a row per job then schedules nothing per job. The error is a
 * {@link TimeoutException}; the timer runs on Reactor's parallel scheduler.
 */
final class SilenceTimeout<T> extends Flux<T> {

    private final Flux<T> source;
    private final long timeoutNanos;

    SilenceTimeout(Flux<T> source, Duration timeout) {
        this.source = source;
        this.timeoutNanos = timeout.toNanos();
    }

    @Override
    public void subscribe(CoreSubscriber<? super T> actual) {
        source.subscribe(new Watch<>(actual, timeoutNanos, Schedulers.parallel()));
    }

    private static final class Watch<T> implements CoreSubscriber<T>, Subscription {

        /** No signal going on. */
        private static final int IDLE = 0;
        /** A row is being handed on: a timeout that fires meanwhile is left to it. */
        private static final int EMITTING = 1;
        /** The timer fired while a row was handed on: the row's thread ends the call. */
        private static final int TIMED_OUT = 2;
        private static final int DONE = 3;

        @SuppressWarnings("rawtypes")
        private static final AtomicIntegerFieldUpdater<Watch> STATE =
                AtomicIntegerFieldUpdater.newUpdater(Watch.class, "state");
        @SuppressWarnings("rawtypes")
        private static final AtomicIntegerFieldUpdater<Watch> UPSTREAM_CANCELLED =
                AtomicIntegerFieldUpdater.newUpdater(Watch.class, "upstreamCancelled");
        @SuppressWarnings("rawtypes")
        private static final AtomicReferenceFieldUpdater<Watch, Disposable> TIMER =
                AtomicReferenceFieldUpdater.newUpdater(Watch.class, Disposable.class, "timer");
        private static final Disposable ENDED = Disposables.disposed();

        private final CoreSubscriber<? super T> actual;
        private final long timeoutNanos;
        private final Scheduler scheduler;
        private @Nullable Subscription upstream;
        private volatile int state;
        /** 1 once the upstream was cancelled: by the timeout or by the downstream, never both. */
        private volatile int upstreamCancelled;
        private volatile long lastSignal;
        private volatile @Nullable Disposable timer;

        private Watch(CoreSubscriber<? super T> actual, long timeoutNanos, Scheduler scheduler) {
            this.actual = actual;
            this.timeoutNanos = timeoutNanos;
            this.scheduler = scheduler;
            this.lastSignal = scheduler.now(TimeUnit.NANOSECONDS);
        }

        void arm(long delayNanos) {
            Disposable current = timer;
            if (current == ENDED) {
                return;
            }
            Disposable next = scheduler.schedule(this::check, delayNanos, TimeUnit.NANOSECONDS);
            if (!TIMER.compareAndSet(this, current, next)) {
                next.dispose(); // ended meanwhile
            }
        }

        private void check() {
            if (state == DONE) {
                return;
            }
            long silent = scheduler.now(TimeUnit.NANOSECONDS) - lastSignal;
            if (silent < timeoutNanos) {
                arm(timeoutNanos - silent);
                return;
            }
            if (STATE.compareAndSet(this, IDLE, DONE)) {
                timedOut();
            } else {
                STATE.compareAndSet(this, EMITTING, TIMED_OUT);
            }
        }

        private void timedOut() {
            endTimer();
            cancelUpstream();
            actual.onError(new TimeoutException("Did not observe any item or terminal signal within "
                    + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + "ms"));
        }

        private void endTimer() {
            Disposable current = TIMER.getAndSet(this, ENDED);
            if (current != null) {
                current.dispose();
            }
        }

        @Override
        public Context currentContext() {
            return actual.currentContext();
        }

        @Override
        public void onSubscribe(Subscription subscription) {
            if (Operators.validate(upstream, subscription)) {
                upstream = subscription;
                actual.onSubscribe(this);
                arm(timeoutNanos);
            }
        }

        @Override
        public void onNext(T value) {
            lastSignal = scheduler.now(TimeUnit.NANOSECONDS);
            if (!STATE.compareAndSet(this, IDLE, EMITTING)) {
                Operators.onDiscard(value, actual.currentContext());
                return;
            }
            actual.onNext(value);
            if (!STATE.compareAndSet(this, EMITTING, IDLE) && STATE.compareAndSet(this, TIMED_OUT, DONE)) {
                timedOut();
            }
        }

        @Override
        public void onError(Throwable error) {
            if (STATE.compareAndSet(this, IDLE, DONE)) {
                endTimer();
                actual.onError(error);
            } else {
                Operators.onErrorDropped(error, actual.currentContext());
            }
        }

        @Override
        public void onComplete() {
            if (STATE.compareAndSet(this, IDLE, DONE)) {
                endTimer();
                actual.onComplete();
            }
        }

        @Override
        public void request(long n) {
            Subscription subscription = upstream;
            if (subscription != null) {
                subscription.request(n);
            }
        }

        @Override
        public void cancel() {
            state = DONE;
            endTimer();
            cancelUpstream();
        }

        /**
         * Cancels the upstream once. The timer's thread (a timeout) and the downstream's (a cancel,
         * say a {@code next()} that got its row) may both get here at once, and a subscription's
         * cancel must not be called concurrently (Reactive Streams 2.7): r2dbc-postgresql's connection
         * close, reached by both, drained its single-consumer buffer from two threads and spun for
         * ever on both (seen in {@code RedisBlockHoundIT} on a loaded machine).
         */
        private void cancelUpstream() {
            Subscription subscription = upstream;
            if (subscription != null && UPSTREAM_CANCELLED.compareAndSet(this, 0, 1)) {
                subscription.cancel();
            }
        }
    }
}
