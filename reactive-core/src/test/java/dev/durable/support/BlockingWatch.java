package dev.durable.support;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import reactor.blockhound.BlockHound;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Hooks;
import reactor.core.scheduler.Schedulers;

/**
 * BlockHound for the BlockHound test runs: every blocking call on a Reactor or Netty thread is
 * recorded with its stack, and every error Reactor drops is kept, for the test to assert both empty.
 * Installs once per JVM (BlockHound instruments the whole JVM: such tests run in a JVM of their own).
 */
public final class BlockingWatch {

    private static final List<String> BLOCKING_CALLS = new CopyOnWriteArrayList<>();
    private static final List<Throwable> DROPPED = new CopyOnWriteArrayList<>();
    private static boolean installed;

    private BlockingWatch() {
    }

    public static synchronized void install() {
        if (installed) {
            return;
        }
        BlockHound.builder()
                .loadIntegrations()
                // The test's logger writes to stderr synchronously; a production logger is the
                // application's choice (asynchronous appenders), not the library's.
                .allowBlockingCallsInside("org.slf4j.simple.SimpleLogger", "write")
                // Netty's adaptive allocator takes a short internal lock when an event loop grows its
                // buffer magazines (seen on a Lettuce event loop under load); Netty's, not ours.
                .allowBlockingCallsInside("io.netty.buffer.AdaptivePoolingAllocator$MagazineGroup", "tryExpandMagazines")
                .blockingMethodCallback(method -> BLOCKING_CALLS.add(method + " on "
                        + Thread.currentThread().getName() + "\n" + stack()))
                .install();
        Hooks.onErrorDropped(DROPPED::add);
        // A parallel thread made before the install waits in a DelayedWorkQueue.take() that began
        // uninstrumented, so BlockHound never saw it enter that allowed method: each wake-up and re-park
        // there (a timer queued behind an earlier one signals it) would count as blocking until the thread
        // runs a task and takes again. Give every parallel thread a task now.
        int workers = Schedulers.DEFAULT_POOL_SIZE;
        Flux.range(0, workers).parallel(workers).runOn(Schedulers.parallel()).sequential().blockLast();
        // Parks seen until then were in those old waits.
        BLOCKING_CALLS.clear();
        installed = true;
    }

    /** Blocking calls seen on non-blocking threads so far. */
    public static List<String> blockingCalls() {
        return BLOCKING_CALLS;
    }

    /** Errors Reactor dropped so far. */
    public static List<Throwable> dropped() {
        return DROPPED;
    }

    private static String stack() {
        StringBuilder out = new StringBuilder();
        for (StackTraceElement element : new Throwable().getStackTrace()) {
            out.append("  at ").append(element).append('\n');
        }
        return out.toString();
    }
}
