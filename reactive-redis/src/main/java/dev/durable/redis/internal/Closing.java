package dev.durable.redis.internal;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Runs close steps in order, every one even when an earlier one fails, and reports all failures. */
final class Closing {

    private Closing() {
    }

    /** The first failure with the others added as suppressed, after every step ran. */
    static Mono<Void> all(List<Mono<Void>> steps) {
        return Mono.defer(() -> {
            List<Throwable> errors = new CopyOnWriteArrayList<>();
            return Flux.fromIterable(steps)
                    .concatMap(step -> step.onErrorResume(error -> {
                        errors.add(error);
                        return Mono.empty();
                    }))
                    .then(Mono.defer(() -> {
                        if (errors.isEmpty()) {
                            return Mono.empty();
                        }
                        Throwable first = errors.get(0);
                        errors.subList(1, errors.size()).forEach(first::addSuppressed);
                        return Mono.error(first);
                    }));
        });
    }
}
