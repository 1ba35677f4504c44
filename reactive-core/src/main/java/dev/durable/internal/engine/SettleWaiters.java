package dev.durable.internal.engine;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import java.util.function.Supplier;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Callers waiting for instances to reach a status. A wait re-reads the instance when this engine
 * sees it change (commit, reaper, signal, cancel) and, for changes made elsewhere, on a timer that
 * backs off from 50 ms to one read a second: no hot loop on the database.
 */
public final class SettleWaiters {

    private static final Duration FIRST_READ_AFTER = Duration.ofMillis(50);
    private static final Duration SLOWEST_READ = Duration.ofSeconds(1);

    private final Map<Long, List<Sinks.Many<InstanceStatus>>> waiting = new ConcurrentHashMap<>();

    /** An instance changed status on this engine. */
    public void changed(long id, InstanceStatus status) {
        List<Sinks.Many<InstanceStatus>> sinks = waiting.get(id);
        if (sinks == null) {
            return;
        }
        for (Sinks.Many<InstanceStatus> sink : sinks) {
            synchronized (sink) {
                sink.tryEmitNext(status); // a waiter busy reading drops it: it reads again anyway
            }
        }
    }

    /** The instance once its status is wanted; empty when no instance has that id. */
    public Mono<Instance> await(long id, Predicate<InstanceStatus> wanted, Supplier<Mono<Instance>> read) {
        return Mono.defer(() -> {
            Sinks.Many<InstanceStatus> changes = Sinks.many().multicast().directBestEffort();
            waiting.compute(id, (key, sinks) -> {
                List<Sinks.Many<InstanceStatus>> list = sinks == null ? new CopyOnWriteArrayList<>() : sinks;
                list.add(changes);
                return list;
            });
            Flux<Integer> timer = Flux.range(0, Integer.MAX_VALUE)
                    .concatMap(n -> Mono.delay(backoff(n)).thenReturn(n), 0);
            return Flux.merge(Flux.just(0), changes.asFlux().map(status -> 0), timer)
                    .onBackpressureLatest()
                    .concatMap(trigger -> read.get().map(Optional::of).defaultIfEmpty(Optional.empty()), 0)
                    .filter(instance -> instance.isEmpty() || wanted.test(instance.get().status()))
                    .next()
                    .flatMap(Mono::justOrEmpty)
                    .doFinally(signal -> waiting.computeIfPresent(id, (key, sinks) -> {
                        sinks.remove(changes);
                        return sinks.isEmpty() ? null : sinks;
                    }));
        });
    }

    private static Duration backoff(int reads) {
        long millis = FIRST_READ_AFTER.toMillis() << Math.min(reads, 10);
        return Duration.ofMillis(Math.min(millis, SLOWEST_READ.toMillis()));
    }
}
