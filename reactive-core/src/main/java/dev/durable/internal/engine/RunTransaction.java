package dev.durable.internal.engine;

import dev.durable.StepTransactionException;
import io.r2dbc.spi.Batch;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionMetadata;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import io.r2dbc.spi.TransactionDefinition;
import io.r2dbc.spi.ValidationDepth;
import java.time.Duration;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The connection a transactional handler sees: the engine's connection of the run's transaction,
 * minus what only the engine may do with it. Statements, batches and savepoints go through while the
 * run is open; commit, rollback, close and changes of auto-commit or isolation fail with
 * {@link StepTransactionException} (the engine commits the handler's work with its outcome); and once
 * the run has ended ({@link #end}) everything fails, a statement made earlier and executed later
 * included, so the connection never escapes its step into another run's transaction or the pool.
 */
public final class RunTransaction implements Connection {

    private final Connection connection;
    private final String run;
    private volatile boolean ended;

    RunTransaction(Connection connection, String run) {
        this.connection = connection;
        this.run = run;
    }

    /** Whether {@code connection} is a transactional run's own. */
    public static boolean is(Connection connection) {
        return connection instanceof RunTransaction;
    }

    /** The run ended: nothing goes through to the connection from now on. */
    void end() {
        ended = true;
    }

    private void requireOpen(String what) {
        if (ended) {
            throw new StepTransactionException(what + " on the transaction of " + run + " after its handler ended:"
                    + " the connection belongs to the run, and went back to the engine when the run's Mono ended");
        }
    }

    private <T> Mono<T> engines(String what) {
        return Mono.error(new StepTransactionException(what + " on the transaction of " + run + ": the engine"
                + " commits the handler's work with its outcome (or rolls both back); end the handler's Mono instead"));
    }

    @Override
    public Statement createStatement(String sql) {
        requireOpen("a statement");
        return new RunStatement(connection.createStatement(sql));
    }

    @Override
    public Batch createBatch() {
        requireOpen("a batch");
        Batch batch = connection.createBatch();
        return new Batch() {
            @Override
            public Batch add(String sql) {
                batch.add(sql);
                return this;
            }

            @Override
            public Publisher<? extends Result> execute() {
                return Flux.defer(() -> {
                    requireOpen("a batch");
                    return batch.execute();
                });
            }
        };
    }

    @Override
    public Publisher<Void> createSavepoint(String name) {
        return Mono.defer(() -> {
            requireOpen("a savepoint");
            return Mono.from(connection.createSavepoint(name));
        });
    }

    @Override
    public Publisher<Void> releaseSavepoint(String name) {
        return Mono.defer(() -> {
            requireOpen("a savepoint's release");
            return Mono.from(connection.releaseSavepoint(name));
        });
    }

    @Override
    public Publisher<Void> rollbackTransactionToSavepoint(String name) {
        return Mono.defer(() -> {
            requireOpen("a rollback to a savepoint");
            return Mono.from(connection.rollbackTransactionToSavepoint(name));
        });
    }

    @Override
    public Publisher<Void> setLockWaitTimeout(Duration timeout) {
        return Mono.defer(() -> {
            requireOpen("a lock wait timeout");
            return Mono.from(connection.setLockWaitTimeout(timeout));
        });
    }

    @Override
    public Publisher<Void> setStatementTimeout(Duration timeout) {
        return Mono.defer(() -> {
            requireOpen("a statement timeout");
            return Mono.from(connection.setStatementTimeout(timeout));
        });
    }

    @Override
    public Publisher<Boolean> validate(ValidationDepth depth) {
        return Mono.defer(() -> ended ? Mono.just(false) : Mono.from(connection.validate(depth)));
    }

    @Override
    public boolean isAutoCommit() {
        return false;
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
    public Publisher<Void> beginTransaction() {
        return engines("beginTransaction");
    }

    @Override
    public Publisher<Void> beginTransaction(TransactionDefinition definition) {
        return engines("beginTransaction");
    }

    @Override
    public Publisher<Void> commitTransaction() {
        return engines("commitTransaction");
    }

    @Override
    public Publisher<Void> rollbackTransaction() {
        return engines("rollbackTransaction");
    }

    @Override
    public Publisher<Void> close() {
        return engines("close");
    }

    @Override
    public Publisher<Void> setAutoCommit(boolean autoCommit) {
        return engines("setAutoCommit");
    }

    @Override
    public Publisher<Void> setTransactionIsolationLevel(IsolationLevel isolationLevel) {
        return engines("setTransactionIsolationLevel");
    }

    /** A statement of the run: it executes only while the run is open. */
    private final class RunStatement implements Statement {

        private final Statement statement;

        RunStatement(Statement statement) {
            this.statement = statement;
        }

        @Override
        public Statement add() {
            statement.add();
            return this;
        }

        @Override
        public Statement bind(int index, Object value) {
            statement.bind(index, value);
            return this;
        }

        @Override
        public Statement bind(String name, Object value) {
            statement.bind(name, value);
            return this;
        }

        @Override
        public Statement bindNull(int index, Class<?> type) {
            statement.bindNull(index, type);
            return this;
        }

        @Override
        public Statement bindNull(String name, Class<?> type) {
            statement.bindNull(name, type);
            return this;
        }

        @Override
        public Statement returnGeneratedValues(String... columns) {
            statement.returnGeneratedValues(columns);
            return this;
        }

        @Override
        public Statement fetchSize(int rows) {
            statement.fetchSize(rows);
            return this;
        }

        @Override
        public Publisher<? extends Result> execute() {
            return Flux.defer(() -> {
                requireOpen("a statement");
                return statement.execute();
            });
        }
    }
}
