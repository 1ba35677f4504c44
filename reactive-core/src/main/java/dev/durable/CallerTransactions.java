package dev.durable;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import reactor.core.publisher.Mono;

/**
 * Where a caller's own open transaction comes from, so that {@code engine.insert(request)} inside it
 * joins it: the job exists if and only if the caller's transaction commits (the outbox pattern),
 * and its queue is poked after the commit, so it starts at once rather than at the next poll.
 * The Spring Boot starter plugs in Spring's reactive transactions ({@code TransactionalOperator},
 * {@code @Transactional}) on the engine's {@code ConnectionFactory}; set one with
 * {@link DurableEngine.Builder#joinTransactions}.
 *
 * <p>Without one (the default), inserts use the engine's own connections; the explicit
 * {@link DurableEngine#insert(Connection, JobRequest)} still takes a connection by hand.
 */
@FunctionalInterface
public interface CallerTransactions {

    /** Never joins anything. */
    CallerTransactions NONE = connections -> Mono.empty();

    /**
     * The transaction the subscriber of the insert has open on {@code connections} (read from the
     * Reactor context), or empty when it has none: the insert then runs on its own.
     */
    Mono<Joined> current(ConnectionFactory connections);

    /** An open transaction an insert joins. */
    interface Joined {

        /** The connection the transaction runs on; the insert's statement goes on it. */
        Connection connection();

        /** Runs {@code action} once the transaction has committed (never after a rollback). */
        void afterCommit(Runnable action);
    }
}
