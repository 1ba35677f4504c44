package dev.durable;

import reactor.core.publisher.Mono;

/**
 * The work of a job type: arguments in, a {@code Mono} of the result out. An error is retried
 * with the type's backoff until its attempts run out; a {@link PermanentFailureException} fails
 * the instance at once. An empty {@code Mono} completes the job with no result.
 */
@FunctionalInterface
public interface JobHandler<A, R> {

    Mono<R> handle(A args, JobContext context);
}
