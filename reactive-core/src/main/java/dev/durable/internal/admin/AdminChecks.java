package dev.durable.internal.admin;

import dev.durable.InvalidRequestException;
import dev.durable.JobRequest;
import dev.durable.QueueNames;
import dev.durable.admin.PageRequest;
import reactor.core.publisher.Mono;

/** The admin's checks of what an operator gives, each a typed error before any statement runs. */
final class AdminChecks {

    private AdminChecks() {
    }

    static Mono<Void> priority(int priority) {
        return priority < JobRequest.MIN_PRIORITY || priority > JobRequest.MAX_PRIORITY
                ? Mono.error(new InvalidRequestException("priority must be between " + JobRequest.MIN_PRIORITY
                        + " and " + JobRequest.MAX_PRIORITY + ", was " + priority))
                : Mono.empty();
    }

    static Mono<Void> queue(String queue) {
        return Mono.fromRunnable(() -> QueueNames.check("queue", queue));
    }

    static Mono<Void> batchSize(int batchSize) {
        return batchSize < 1 || batchSize > PageRequest.MAX_SIZE * 10
                ? Mono.error(new InvalidRequestException("batch size must be between 1 and "
                        + PageRequest.MAX_SIZE * 10 + ", was " + batchSize))
                : Mono.empty();
    }
}
