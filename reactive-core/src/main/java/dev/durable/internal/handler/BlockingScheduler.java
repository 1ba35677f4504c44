package dev.durable.internal.handler;

import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.Executors;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Where handlers declared blocking run, whatever the engine's handler scheduler: a virtual thread
 * per task on a JDK that has them (21 and later), else bounded-elastic platform threads. Shared by
 * every engine of the JVM and made on first use; its threads are daemons. The queues' concurrency
 * is what bounds how many run at once: the platform-thread cap only stops a runaway.
 */
public final class BlockingScheduler {

    private static final Logger log = Loggers.getLogger(BlockingScheduler.class);
    /** Platform threads, made on demand and dropped after a minute idle. */
    static final int PLATFORM_THREAD_CAP = 1_000;
    static final int QUEUED_TASK_CAP = 100_000;

    private record Made(Scheduler scheduler, boolean virtual) {
    }

    /** Made on first use, under the class-loading lock. */
    private static final class Holder {
        static final Made MADE = create();
    }

    private BlockingScheduler() {
    }

    public static Scheduler get() {
        return Holder.MADE.scheduler();
    }

    /**
     * The blocking call on this scheduler. A cancelled run interrupts its thread; what the call then
     * throws (an {@code InterruptedException}, say) is nobody's to hear, so it ends quietly rather
     * than as a dropped error.
     */
    public static <T> Mono<T> call(Callable<T> call) {
        return Mono.defer(() -> {
            AtomicBoolean cancelled = new AtomicBoolean();
            return Mono.fromCallable(() -> {
                        try {
                            return call.call();
                        } catch (Exception error) {
                            if (cancelled.get()) {
                                return null;
                            }
                            throw error;
                        }
                    })
                    .subscribeOn(get())
                    .doOnCancel(() -> cancelled.set(true));
        });
    }

    /** True when blocking handlers run on virtual threads. */
    public static boolean virtual() {
        return Holder.MADE.virtual();
    }

    private static Made create() {
        if (Runtime.version().feature() >= 21) {
            try {
                // Compiled for 17: the JDK 21 factory is looked up, not linked.
                ExecutorService perTask = (ExecutorService) Executors.class
                        .getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
                return new Made(Schedulers.fromExecutorService(perTask, "durable-blocking"), true);
            } catch (ReflectiveOperationException | RuntimeException notHere) {
                log.debug("virtual threads unavailable for blocking handlers: {}", notHere.toString());
            }
        }
        return new Made(Schedulers.newBoundedElastic(PLATFORM_THREAD_CAP, QUEUED_TASK_CAP, "durable-blocking",
                (int) Duration.ofMinutes(1).toSeconds(), true), false);
    }
}
