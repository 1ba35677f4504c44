package dev.durable.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.durable.DurableDatabaseException;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Hooks;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;

/**
 * Issue 18: a killed connection costs one line, not a stack trace and not a misleading error. The
 * error that ended a call is the one reported even when the rollback after it fails on the dead
 * connection, and an error signalled after a call ended never reaches the application's global
 * dropped-error hook (Reactor's default logs each with a stack trace).
 */
@ExtendWith(PostgresExtension.class)
class DbIT {

    private final List<Throwable> droppedGlobally = new CopyOnWriteArrayList<>();

    @AfterEach
    void resetHooks() {
        Hooks.resetOnErrorDropped();
    }

    @Test
    void aTransactionWhoseConnectionDiesReportsItsOwnErrorNotTheFailedRollback(TestDatabase database) {
        Db db = new Db(database.connectionFactory(), Duration.ofSeconds(20));
        // The server ends this very session mid-transaction: the statement fails (57P01), then the
        // rollback fails on the dead connection.
        Throwable error = catchThrowable(() -> db.inTransaction(connection -> Flux.from(connection
                        .createStatement("SELECT pg_terminate_backend(pg_backend_pid())").execute())
                        .flatMap(result -> result.map((row, meta) -> row.get(0))))
                .blockLast(Duration.ofSeconds(30)));
        assertThat(error).isInstanceOf(DurableDatabaseException.class)
                .hasMessageNotContaining("Async resource cleanup failed");
        assertThat(Errors.isTransient(error)).as("classified from the statement's own error: " + error).isTrue();
        // The pool still serves: the dead connection was discarded, not lent again.
        assertThat(db.withConnection(connection -> Flux.from(connection.createStatement("SELECT 1").execute())
                        .flatMap(result -> result.map((row, meta) -> row.get(0, Integer.class))))
                .blockLast(Duration.ofSeconds(30))).isEqualTo(1);
    }

    @Test
    void anErrorAfterACallEndedIsOneDebugLineNeverTheGlobalHook(TestDatabase database) {
        Hooks.onErrorDropped(droppedGlobally::add);
        Db db = new Db(database.connectionFactory(), Duration.ofSeconds(20));
        // As a connection cut mid-statement does: the call ends, then the driver signals an error.
        Object answer = db.withConnection(connection -> lateError().map(x -> x)).blockLast(Duration.ofSeconds(30));
        assertThat(answer).isNull();
        assertThat(droppedGlobally).isEmpty();
        // Outside the engine's calls the application's hook still hears everything.
        lateError().map(x -> x).blockLast(Duration.ofSeconds(5));
        assertThat(droppedGlobally).hasSize(1);
    }

    /** A publisher that completes, then errors: what a cut connection's conversation does after its answer. */
    private static Flux<Integer> lateError() {
        return Flux.from(subscriber -> {
            subscriber.onSubscribe(Operators.emptySubscription());
            subscriber.onComplete();
            subscriber.onError(new IOException("Broken pipe"));
        });
    }
}
