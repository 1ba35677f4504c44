package dev.durable.internal;

import java.util.List;
import reactor.core.publisher.Mono;

/** Shutdown steps that must all run, in order, whatever the ones before them did. */
public final class Cleanup {

    private Cleanup() {
    }

    /**
     * Runs {@code first}, then {@code second} even when the first failed; fails at the end with the
     * first error, a later one added to it as suppressed.
     */
    public static Mono<Void> inOrder(Mono<Void> first, Mono<Void> second) {
        return inOrder(List.of(first, second));
    }

    /** As {@link #inOrder(Mono, Mono)}, for any number of steps. */
    public static Mono<Void> inOrder(List<Mono<Void>> steps) {
        return Mono.defer(() -> {
            Throwable[] first = new Throwable[1];
            Mono<Void> chain = Mono.empty();
            for (Mono<Void> step : steps) {
                chain = chain.then(step.onErrorResume(error -> {
                    if (first[0] == null) {
                        first[0] = error;
                    } else if (first[0] != error) {
                        first[0].addSuppressed(error);
                    }
                    return Mono.empty();
                }));
            }
            return chain.then(Mono.defer(() -> first[0] == null ? Mono.<Void>empty() : Mono.error(first[0])));
        });
    }
}
