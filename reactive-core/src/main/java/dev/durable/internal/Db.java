package dev.durable.internal;

import dev.durable.DatabaseTimeoutException;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.context.Context;

/**
 * Connection and transaction scoping over a {@link ConnectionFactory}, with a bound on every call.
 * Every connection is tied to the subscription with {@code usingWhen}, so completion, error and
 * cancel all release it, and a transaction is rolled back on error or cancel. A call that stays
 * silent past its timeout (connection acquisition included) fails with
 * {@link DatabaseTimeoutException}, and the connection it held is discarded rather than given back:
 * a half-open or stalled connection must never be handed to the next call. Driver errors come out
 * translated.
 */
public final class Db {

    private static final Logger log = Loggers.getLogger(Db.class);

    private final ConnectionFactory connectionFactory;
    private final Duration timeout;

    public Db(ConnectionFactory connectionFactory, Duration timeout) {
        this.connectionFactory = connectionFactory;
        this.timeout = timeout;
    }

    /** The same database with another bound on each call (migrations may run for minutes). */
    public Db withTimeout(Duration other) {
        return new Db(connectionFactory, other);
    }

    /** Runs {@code work} on one connection in auto-commit mode. */
    public <T> Flux<T> withConnection(Function<Connection, ? extends Publisher<T>> work) {
        return bounded(Flux.usingWhen(connectionFactory.create(), work, Connection::close, Db::afterError,
                Db::discard));
    }

    /** Runs {@code work} in one transaction: committed when it completes, rolled back otherwise. */
    public <T> Flux<T> inTransaction(Function<Connection, ? extends Publisher<T>> work) {
        return bounded(Flux.usingWhen(connectionFactory.create(), connection -> inTransaction(connection, work),
                Connection::close, Db::afterError, Db::discard));
    }

    /**
     * As {@link #inTransaction(Function)}, at {@code isolation} whatever the connection's default (it
     * goes with the BEGIN: no statement of its own).
     */
    public <T> Flux<T> inTransaction(IsolationLevel isolation, Function<Connection, ? extends Publisher<T>> work) {
        return bounded(Flux.usingWhen(connectionFactory.create(),
                connection -> inTransaction(connection, connection.beginTransaction(isolation), work),
                Connection::close, Db::afterError, Db::discard));
    }

    /**
     * Each answer (a row, or the end) within the timeout; a silent call is cut and its connection
     * discarded. An error the driver signals after the call ended (a connection cut mid-statement
     * answers a cancelled call with "Broken pipe") is one debug line, through the subscription's own
     * dropped-error hook: never the global hook, which belongs to the application.
     */
    private <T> Flux<T> bounded(Flux<T> call) {
        return new SilenceTimeout<>(call, timeout)
                .onErrorMap(TimeoutException.class, silent -> new DatabaseTimeoutException(timeout))
                .onErrorMap(Errors::translate)
                .contextWrite(Context.of(ON_ERROR_DROPPED, DROPPED));
    }

    /** Reactor's key for a subscription's own dropped-error hook (Hooks.KEY_ON_ERROR_DROPPED, package-private there). */
    static final String ON_ERROR_DROPPED = "reactor.onErrorDropped.local";

    private static final Consumer<Throwable> DROPPED = error -> log.debug("database error after its call ended: {}",
            error.toString());

    /**
     * A connection that failed in the driver or the network is discarded; one the server refused a
     * statement on is given back, or discarded when even that fails. Never errors: the error that
     * ended the call is the one to report, not a cleanup's on a dead connection.
     */
    private static Publisher<Void> afterError(Connection connection, Throwable error) {
        return Errors.isTransient(Errors.translate(error)) ? discard(connection)
                : Mono.from(connection.close()).onErrorResume(closeFailed -> discard(connection));
    }

    /**
     * Closes the physical connection under any pool wrapper, then gives the wrapper back: the pool
     * validates a connection before lending it and drops a closed one, so a stalled connection is
     * never reused. Never errors: discarding is best effort and bounded.
     */
    public static Mono<Void> discard(Connection connection) {
        Connection physical = connection;
        while (physical instanceof Wrapped<?> wrapped && wrapped.unwrap() instanceof Connection inner) {
            physical = inner;
        }
        Mono<Void> closePhysical = physical == connection ? Mono.empty()
                : Mono.from(physical.close()).timeout(Duration.ofSeconds(1)).onErrorResume(error -> Mono.empty());
        return closePhysical
                .then(Mono.from(connection.close()).timeout(Duration.ofSeconds(1)))
                .onErrorResume(error -> Mono.empty());
    }

    /** Runs {@code work} in a transaction on a connection the caller owns. */
    public static <T> Flux<T> inTransaction(Connection connection,
            Function<Connection, ? extends Publisher<T>> work) {
        return inTransaction(connection, connection.beginTransaction(), work);
    }

    /**
     * Runs {@code work} in a transaction that {@code begin} opens on a connection the caller owns
     * (a BEGIN with settings of its own); committed or rolled back as {@link #inTransaction(Function)}.
     */
    public static <T> Flux<T> inTransaction(Connection connection, Publisher<Void> begin,
            Function<Connection, ? extends Publisher<T>> work) {
        // A rollback that fails (the connection died with the statement) discards the connection and
        // lets the statement's own error through, rather than Reactor's "cleanup failed" in its place.
        return Flux.usingWhen(Mono.from(begin).thenReturn(connection),
                work,
                c -> c.commitTransaction(),
                (c, error) -> Mono.from(c.rollbackTransaction()).onErrorResume(failed -> discard(c)),
                c -> Mono.from(c.rollbackTransaction()).onErrorResume(failed -> discard(c)));
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
