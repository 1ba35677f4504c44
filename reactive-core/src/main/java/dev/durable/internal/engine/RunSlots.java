package dev.durable.internal.engine;

import java.util.ArrayDeque;
import java.util.Queue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A bound on the runs that hold one of the engine's connections for their whole duration (the
 * transactional ones): at most {@code max} at once, the others waiting their turn first come, first
 * served, without a blocked thread. The pool's other connections stay free for the picks, commits
 * and heartbeats every run depends on. A wait is bounded by the runs ahead of it, each bounded by
 * its type's timeout; a waiting run that is cancelled gives up its place (the grant that reaches it
 * passes it by).
 */
final class RunSlots {

    private static final int WAITING = 0;
    private static final int HOLDING = 1;
    private static final int GONE = 2;

    /** One run's place: waiting, holding a slot, or gone (left the line, or gave its slot back). */
    private static final class Place {

        final AtomicInteger state = new AtomicInteger(WAITING);
        final Sinks.Empty<Void> granted = Sinks.empty();
    }

    private final int max;
    private final Queue<Place> line = new ArrayDeque<>();
    private int held;

    RunSlots(int max) {
        this.max = max;
    }

    /** Runs {@code task} once a slot is free, holding it until the task ends (or is cancelled). */
    <T> Mono<T> run(Supplier<Mono<T>> task) {
        return Mono.defer(() -> {
            Place place = new Place();
            boolean now;
            synchronized (this) {
                now = held < max;
                if (now) {
                    held++;
                    place.state.set(HOLDING);
                } else {
                    line.add(place);
                }
            }
            Mono<Void> turn = now ? Mono.empty() : place.granted.asMono();
            return turn.then(Mono.defer(task)).doFinally(signal -> leave(place));
        });
    }

    /** A run ended: a held slot goes to the first run still waiting; a waiting run leaves the line. */
    private void leave(Place place) {
        if (place.state.compareAndSet(WAITING, GONE)) {
            return; // never granted: the grant that finds it gone passes the slot on
        }
        if (!place.state.compareAndSet(HOLDING, GONE)) {
            return;
        }
        for (;;) {
            Place next;
            synchronized (this) {
                next = line.poll();
                if (next == null) {
                    held--;
                    return;
                }
            }
            if (next.state.compareAndSet(WAITING, HOLDING)) {
                next.granted.tryEmitEmpty();
                return;
            }
        }
    }
}
