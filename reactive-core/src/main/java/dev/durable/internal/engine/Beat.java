package dev.durable.internal.engine;

import java.util.List;
import java.util.Set;
import reactor.core.publisher.Mono;

/**
 * Renews the leases of the rows a {@link QueueScheduler} holds (buffered and running); says which
 * are still held and which of those have a cancel requested, or nothing when the beat failed.
 */
@FunctionalInterface
interface Beat {

    Mono<Renewal> beat(List<Long> held);

    /**
     * Renews the limiter's gate slots of the rows held, on a loop of its own: a slow database
     * must not hold back the renewals that keep a slot from expiring under a live lease.
     */
    default Mono<Void> renewSlots() {
        return Mono.empty();
    }

    /**
     * What a heartbeat found: the rows whose lease it renewed, the rows still this worker's that it
     * left unrenewed because another transaction held them locked (their lease deadline stays), and
     * which of either have a cancel requested.
     */
    record Renewal(Set<Long> renewed, Set<Long> leftLocked, Set<Long> cancelRequested) {

        Renewal(Set<Long> renewed, Set<Long> cancelRequested) {
            this(renewed, Set.of(), cancelRequested);
        }

        boolean holds(long id) {
            return renewed.contains(id) || leftLocked.contains(id);
        }
    }
}
