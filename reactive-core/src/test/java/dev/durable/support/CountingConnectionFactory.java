package dev.durable.support;

import io.r2dbc.spi.Batch;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.ConnectionMetadata;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.Statement;
import io.r2dbc.spi.TransactionDefinition;
import io.r2dbc.spi.ValidationDepth;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/** Wraps a factory and records every statement created, so tests can count round trips. */
public final class CountingConnectionFactory implements ConnectionFactory {

    private final ConnectionFactory delegate;
    private final List<String> statements = new CopyOnWriteArrayList<>();

    public CountingConnectionFactory(ConnectionFactory delegate) {
        this.delegate = delegate;
    }

    public long count(Predicate<String> sql) {
        return statements.stream().filter(sql).count();
    }

    public void reset() {
        statements.clear();
    }

    @Override
    public Publisher<? extends Connection> create() {
        return Mono.from(delegate.create()).map(CountingConnection::new);
    }

    @Override
    public ConnectionFactoryMetadata getMetadata() {
        return delegate.getMetadata();
    }

    private final class CountingConnection implements Connection {

        private final Connection connection;

        CountingConnection(Connection connection) {
            this.connection = connection;
        }

        @Override
        public Statement createStatement(String sql) {
            statements.add(sql);
            return connection.createStatement(sql);
        }

        @Override
        public Publisher<Void> beginTransaction() {
            return connection.beginTransaction();
        }

        @Override
        public Publisher<Void> beginTransaction(TransactionDefinition definition) {
            return connection.beginTransaction(definition);
        }

        @Override
        public Publisher<Void> close() {
            return connection.close();
        }

        @Override
        public Publisher<Void> commitTransaction() {
            return connection.commitTransaction();
        }

        @Override
        public Batch createBatch() {
            return connection.createBatch();
        }

        @Override
        public Publisher<Void> createSavepoint(String name) {
            return connection.createSavepoint(name);
        }

        @Override
        public boolean isAutoCommit() {
            return connection.isAutoCommit();
        }

        @Override
        public ConnectionMetadata getMetadata() {
            return connection.getMetadata();
        }

        @Override
        public IsolationLevel getTransactionIsolationLevel() {
            return connection.getTransactionIsolationLevel();
        }

        @Override
        public Publisher<Void> releaseSavepoint(String name) {
            return connection.releaseSavepoint(name);
        }

        @Override
        public Publisher<Void> rollbackTransaction() {
            return connection.rollbackTransaction();
        }

        @Override
        public Publisher<Void> rollbackTransactionToSavepoint(String name) {
            return connection.rollbackTransactionToSavepoint(name);
        }

        @Override
        public Publisher<Void> setAutoCommit(boolean autoCommit) {
            return connection.setAutoCommit(autoCommit);
        }

        @Override
        public Publisher<Void> setLockWaitTimeout(Duration timeout) {
            return connection.setLockWaitTimeout(timeout);
        }

        @Override
        public Publisher<Void> setStatementTimeout(Duration timeout) {
            return connection.setStatementTimeout(timeout);
        }

        @Override
        public Publisher<Void> setTransactionIsolationLevel(IsolationLevel isolationLevel) {
            return connection.setTransactionIsolationLevel(isolationLevel);
        }

        @Override
        public Publisher<Boolean> validate(ValidationDepth depth) {
            return connection.validate(depth);
        }
    }
}
