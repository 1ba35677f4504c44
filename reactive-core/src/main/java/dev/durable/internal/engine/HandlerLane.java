package dev.durable.internal.engine;

import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.Exceptions;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Where runs hop onto the handler scheduler. A handler scheduler whose threads may block (bounded
 * elastic, the default; virtual threads) gets one task per run, as each run may hold its thread.
 * One whose threads are non-blocking (Reactor's parallel) promises handlers that never block, so the
 * runs of a claimed batch go over together: a start schedules a drain task while fewer than
 * {@link #MAX_DRAINS} drain (as many as the parallel scheduler has threads), and the others queue
 * behind them, run one after the other on those threads, with no task, timer-queue entry or wake-up
 * per run; so runs still spread over every core (a handler's CPU work is not held to one thread) at
 * a few tasks a batch, not one a run. Which kind the scheduler is, the first run learns on the thread
 * it lands on; until then every run gets its own task.
 */
final class HandlerLane implements Scheduler {

    private static final Logger log = Loggers.getLogger(HandlerLane.class);
    /** Starts one drain runs before it lets other tasks of its thread go first (it schedules itself again). */
    private static final int DRAIN_LIMIT = 256;
    private static final int UNKNOWN = 0;
    private static final int BATCHED = 1;
    private static final int PER_RUN = 2;
    /** Drains at once at most: the default parallel scheduler's thread count. */
    private static final int MAX_DRAINS = Math.max(1, Schedulers.DEFAULT_POOL_SIZE);

    private final Scheduler handlerScheduler;
    private final Queue<Task> queue = new ConcurrentLinkedQueue<>();
    /** Drain tasks scheduled or running. */
    private final AtomicInteger drains = new AtomicInteger();
    private volatile int mode = UNKNOWN;
    /** The threads draining now: work they hand on may wait for the end of their drain. */
    private final Set<Thread> drainers = ConcurrentHashMap.newKeySet();
    /** Runs after each drain: the outcomes its runs produced go to the committer together. */
    private volatile Runnable afterDrain = () -> { };

    HandlerLane(Scheduler handlerScheduler) {
        this.handlerScheduler = handlerScheduler;
    }

    /** The scheduler a run's start hops onto: this lane once batching is known safe, else the handler scheduler. */
    Scheduler scheduler() {
        return mode == BATCHED ? this : handlerScheduler;
    }

    /** Called on the thread a run landed on: learns once whether that scheduler's threads may block. */
    void landed() {
        if (mode == UNKNOWN) {
            mode = Schedulers.isInNonBlockingThread() ? BATCHED : PER_RUN;
        }
    }

    /** Sets what runs after each drain (the committer's flush of the outcomes it held back). */
    void afterDrain(Runnable afterDrain) {
        this.afterDrain = afterDrain;
    }

    /** Whether the calling thread is draining the lane now: then what it hands on may wait for {@link #afterDrain}. */
    boolean holding() {
        return !drainers.isEmpty() && drainers.contains(Thread.currentThread());
    }

    /** Whether starts go over in batches (for tests). */
    boolean batched() {
        return mode == BATCHED;
    }

    @Override
    public Disposable schedule(Runnable task) {
        Task queued = new Task(task);
        queue.offer(queued);
        if (acquireDrain()) {
            try {
                handlerScheduler.schedule(this::drain);
            } catch (RuntimeException rejected) {
                // The scheduler is shutting down: a drain still running takes the start, else it is refused.
                if (drains.decrementAndGet() == 0 && queue.remove(queued)) {
                    throw rejected;
                }
            }
        }
        return queued;
    }

    /** Counts one more drain if fewer than {@link #MAX_DRAINS} run. */
    private boolean acquireDrain() {
        for (;;) {
            int running = drains.get();
            if (running >= MAX_DRAINS) {
                return false;
            }
            if (drains.compareAndSet(running, running + 1)) {
                return true;
            }
        }
    }

    private void drain() {
        Thread thread = Thread.currentThread();
        drainers.add(thread);
        boolean ended = false;
        try {
            drainQueue();
            ended = true;
        } finally {
            drainers.remove(thread);
            if (!ended) {
                // A fatal error left the loop while this drain was counted: give its place back, so
                // the starts still queued get a drain.
                drains.decrementAndGet();
                if (!queue.isEmpty() && acquireDrain()) {
                    try {
                        handlerScheduler.schedule(this::drain);
                    } catch (RuntimeException rejected) {
                        drains.decrementAndGet();
                    }
                }
            }
            afterDrain.run();
        }
    }

    private void drainQueue() {
        int ran = 0;
        for (;;) {
            Task task = queue.poll();
            if (task == null) {
                drains.decrementAndGet();
                // A start queued after the poll may have found every drain counted: take it here.
                if (queue.isEmpty() || !acquireDrain()) {
                    return;
                }
                continue;
            }
            task.run();
            if (++ran == DRAIN_LIMIT && !queue.isEmpty()) {
                // Still counted: the next drain goes behind whatever else waits on the handler scheduler.
                try {
                    handlerScheduler.schedule(this::drain);
                    return;
                } catch (RuntimeException rejected) {
                    ran = 0; // the scheduler is shutting down: finish here
                }
            }
        }
    }

    @Override
    public Worker createWorker() {
        return new LaneWorker();
    }

    /** One queued start; disposed before it ran, it never runs. */
    private static final class Task implements Runnable, Disposable {

        private final Runnable task;
        private volatile boolean disposed;

        private Task(Runnable task) {
            this.task = task;
        }

        @Override
        public void run() {
            if (disposed) {
                return;
            }
            try {
                task.run();
            } catch (Throwable error) {
                Exceptions.throwIfJvmFatal(error);
                log.error("a task on the handler lane failed", error);
                Operators.onErrorDropped(error, reactor.util.context.Context.empty());
            }
        }

        @Override
        public void dispose() {
            disposed = true;
        }

        @Override
        public boolean isDisposed() {
            return disposed;
        }
    }

    /** subscribeOn's worker: its tasks go on the lane; disposed, its tasks not yet run never run. */
    private final class LaneWorker implements Worker {

        private volatile boolean disposed;

        @Override
        public Disposable schedule(Runnable task) {
            if (disposed) {
                throw Exceptions.failWithRejected();
            }
            return HandlerLane.this.schedule(() -> {
                if (!disposed) {
                    task.run();
                }
            });
        }

        @Override
        public void dispose() {
            disposed = true;
        }

        @Override
        public boolean isDisposed() {
            return disposed;
        }
    }
}
