package dev.durable.internal;

import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Sinks;

/**
 * Emits into a sink from many threads without holding a lock while subscribers run: each caller
 * queues its item, and whichever caller finds nobody emitting drains the queue, so items reach the
 * sink one at a time, in the order they were queued. Never blocks and never spins; a caller that
 * arrives while another drains returns at once. The sink's own answer is best effort (a sink
 * without subscribers or demand drops the item), which is what events and pokes want.
 */
public final class SerializedEmitter<T> {

    /** Queued by {@link #complete()}: the sink completes when the drain reaches it. */
    private static final Object COMPLETE = new Object();

    private final Sinks.Many<T> sink;
    private final Queue<Object> queue = new ConcurrentLinkedQueue<>();
    private final AtomicInteger wip = new AtomicInteger();

    public SerializedEmitter(Sinks.Many<T> sink) {
        this.sink = sink;
    }

    public void emit(T item) {
        queue.offer(item);
        drain();
    }

    /** Completes the sink after the items queued before this call. */
    public void complete() {
        queue.offer(COMPLETE);
        drain();
    }

    @SuppressWarnings("unchecked")
    private void drain() {
        if (wip.getAndIncrement() != 0) {
            return;
        }
        int missed = 1;
        for (;;) {
            Object next;
            while ((next = queue.poll()) != null) {
                if (next == COMPLETE) {
                    sink.tryEmitComplete();
                } else {
                    sink.tryEmitNext((T) next);
                }
            }
            missed = wip.addAndGet(-missed);
            if (missed == 0) {
                return;
            }
        }
    }
}
