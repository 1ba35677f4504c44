package dev.durable;

import reactor.core.publisher.Mono;

/**
 * One step of a workflow: its context in, a {@code Mono} of the {@link Outcome} out. An error is
 * retried with the workflow's backoff until the step's attempts run out; a
 * {@link PermanentFailureException} fails the instance at once.
 */
@FunctionalInterface
public interface StepHandler<S> {

    Mono<Outcome<S>> run(StepContext<S> context);
}
