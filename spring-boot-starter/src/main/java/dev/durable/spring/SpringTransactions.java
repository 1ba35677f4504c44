package dev.durable.spring;

import dev.durable.CallerTransactions;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import org.springframework.r2dbc.connection.ConnectionHolder;
import org.springframework.transaction.NoTransactionException;
import org.springframework.transaction.reactive.TransactionSynchronization;
import org.springframework.transaction.reactive.TransactionSynchronizationManager;
import org.springframework.util.ClassUtils;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Spring's reactive transactions for {@link CallerTransactions}: the transaction a
 * {@code TransactionalOperator} or {@code @Transactional} method has open on the engine's
 * {@code ConnectionFactory} (an {@code R2dbcTransactionManager} on the same bean), found in the
 * Reactor context as Spring's own {@code DatabaseClient} finds it. The queue is poked from Spring's
 * after-commit callback.
 */
public final class SpringTransactions implements CallerTransactions {

    /** True when Spring's R2DBC and transaction support are on the classpath. */
    static final boolean AVAILABLE = ClassUtils.isPresent("org.springframework.r2dbc.connection.ConnectionHolder",
            SpringTransactions.class.getClassLoader())
            && ClassUtils.isPresent("org.springframework.transaction.reactive.TransactionSynchronizationManager",
                    SpringTransactions.class.getClassLoader());

    private static final Logger log = Loggers.getLogger(SpringTransactions.class);

    @Override
    public Mono<Joined> current(ConnectionFactory connections) {
        return TransactionSynchronizationManager.forCurrentTransaction()
                .filter(manager -> manager.isActualTransactionActive() && manager.isSynchronizationActive())
                .flatMap(manager -> {
                    Object resource = manager.getResource(connections);
                    // Bound by the transaction manager of this very connection factory, or not ours to join.
                    if (!(resource instanceof ConnectionHolder holder)) {
                        return Mono.empty();
                    }
                    return Mono.<Joined>just(new SpringJoined(manager, holder.getConnection()));
                })
                .onErrorResume(NoTransactionException.class, none -> Mono.empty());
    }

    private record SpringJoined(TransactionSynchronizationManager manager, Connection connection) implements Joined {

        @Override
        public void afterCommit(Runnable action) {
            manager.registerSynchronization(new TransactionSynchronization() {
                @Override
                public Mono<Void> afterCommit() {
                    return Mono.fromRunnable(action).onErrorResume(error -> {
                        log.warn("after-commit poke failed: {}", error.toString());
                        return Mono.empty();
                    }).then();
                }
            });
        }
    }
}
