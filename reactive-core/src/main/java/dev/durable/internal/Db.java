package dev.durable.internal;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Connection and transaction scoping over a {@link ConnectionFactory}. Every connection is tied
 * to the subscription with {@code usingWhen}, so completion, error and cancel all release it, and
 * a transaction is rolled back on error or cancel. Driver errors come out translated.
 */
public final class Db {

    private final ConnectionFactory connectionFactory;

    public Db(ConnectionFactory connectionFactory) {
        this.connectionFactory = connectionFactory;
    }

    /** Runs {@code work} on one connection in auto-commit mode. */
    public <T> Flux<T> withConnection(Function<Connection, ? extends Publisher<T>> work) {
        return Flux.usingWhen(connectionFactory.create(), work, Connection::close)
                .onErrorMap(Errors::translate);
    }

    /** Runs {@code work} in one transaction: committed when it completes, rolled back otherwise. */
    public <T> Flux<T> inTransaction(Function<Connection, ? extends Publisher<T>> work) {
        return Flux.usingWhen(connectionFactory.create(),
                        connection -> inTransaction(connection, work),
                        Connection::close)
                .onErrorMap(Errors::translate);
    }

    /** Runs {@code work} in a transaction on a connection the caller owns. */
    public static <T> Flux<T> inTransaction(Connection connection,
            Function<Connection, ? extends Publisher<T>> work) {
        return Flux.usingWhen(Mono.from(connection.beginTransaction()).thenReturn(connection),
                work,
                c -> c.commitTransaction(),
                (c, error) -> c.rollbackTransaction(),
                c -> c.rollbackTransaction());
    }

    /** Executes a statement with positional bindings and discards its results. */
    public static Mono<Void> execute(Connection connection, String sql, Object... args) {
        Statement statement = connection.createStatement(sql);
        for (int i = 0; i < args.length; i++) {
            statement.bind(i, args[i]);
        }
        return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated).then();
    }

    /** Executes a script of several statements (simple query protocol, no bindings). */
    public static Mono<Void> executeScript(Connection connection, String script) {
        return Flux.from(connection.createStatement(script).execute())
                .flatMap(Result::getRowsUpdated)
                .then();
    }

    /** Binds a value that may be null, naming its type for the null case. */
    public static Statement bind(Statement statement, int index, @Nullable Object value, Class<?> type) {
        return value == null ? statement.bindNull(index, type) : statement.bind(index, value);
    }
}
