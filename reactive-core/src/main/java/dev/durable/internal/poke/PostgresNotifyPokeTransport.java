package dev.durable.internal.poke;

import dev.durable.internal.sql.NotifySql;
import dev.durable.poke.PokeContext;
import dev.durable.poke.PokeTransport;
import io.r2dbc.postgresql.api.Notification;
import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * Pokes over PostgreSQL LISTEN/NOTIFY. One dedicated (unpooled) connection per engine listens
 * on the schema's channel and also sends; messages are {@code origin|queue}, and an engine ignores
 * its own origin because it already poked itself locally. Sends coalesce per queue within a short
 * window. A lost connection is re-established with backoff, logged once per outage; meanwhile
 * polling finds the work.
 */
public final class PostgresNotifyPokeTransport implements PokeTransport {

    private static final Logger log = Loggers.getLogger(PostgresNotifyPokeTransport.class);
    /** The origin of pokes sent inside a caller's transaction: every engine acts on them. */
    static final String ANY_ORIGIN = "*";

    private final LocalPokeTransport local = new LocalPokeTransport();
    private final ConnectionFactory factory;
    private final String origin;
    private final NotifySql sql;
    private final Duration coalesceWindow;
    private final Map<String, Boolean> pendingSends = new ConcurrentHashMap<>();
    private final AtomicReference<@Nullable PostgresqlConnection> connection = new AtomicReference<>();
    private final AtomicBoolean outageLogged = new AtomicBoolean();
    private final AtomicBoolean closed = new AtomicBoolean();
    private Disposable listening = reactor.core.Disposables.disposed();

    private PostgresNotifyPokeTransport(PokeContext context, Duration coalesceWindow) {
        this.factory = unwrap(context.connectionFactory());
        this.origin = context.origin();
        this.sql = new NotifySql(context.schema());
        this.coalesceWindow = coalesceWindow;
    }

    /** Connects and listens before it answers, so no poke sent after start is missed. */
    public static Mono<PostgresNotifyPokeTransport> start(PokeContext context, Duration coalesceWindow) {
        return Mono.defer(() -> {
            PostgresNotifyPokeTransport transport = new PostgresNotifyPokeTransport(context, coalesceWindow);
            return transport.listenOnce().doOnSuccess(ready -> transport.listenForever()).thenReturn(transport);
        });
    }

    @Override
    public void poke(String queue) {
        local.poke(queue);
        if (pendingSends.putIfAbsent(queue, Boolean.TRUE) != null) {
            return;
        }
        Mono.delay(coalesceWindow)
                .then(Mono.defer(() -> {
                    pendingSends.remove(queue);
                    PostgresqlConnection current = connection.get();
                    return current == null ? Mono.empty() : send(current, origin, queue);
                }))
                .subscribe(null, error -> log.debug("poke of {} not sent: {}", queue, error.toString()));
    }

    @Override
    public Mono<Void> pokeOnCommit(Connection callerConnection, String queue) {
        // NOTIFY is transactional: PostgreSQL delivers it when the caller commits, never on rollback.
        return send(callerConnection, ANY_ORIGIN, queue);
    }

    @Override
    public Flux<String> pokes() {
        return local.pokes();
    }

    @Override
    public Mono<Void> close() {
        return Mono.defer(() -> {
            if (!closed.compareAndSet(false, true)) {
                return Mono.empty();
            }
            listening.dispose();
            PostgresqlConnection current = connection.getAndSet(null);
            return (current == null ? Mono.<Void>empty() : Mono.from(current.close()).onErrorResume(e -> Mono.empty()))
                    .then(local.close());
        });
    }

    private Mono<Void> send(Connection via, String from, String queue) {
        return sql.notify(via, from + "|" + queue);
    }

    /** Opens the dedicated connection and issues LISTEN; the notifications flow from then on. */
    private Mono<Void> listenOnce() {
        return Mono.from(factory.create())
                .map(created -> unwrapConnection(created))
                .flatMap(created -> sql.listen(created)
                        .then(Mono.fromRunnable(() -> {
                            connection.set(created);
                            if (outageLogged.getAndSet(false)) {
                                log.info("poke channel {} listening again", sql.channel());
                            }
                        })));
    }

    private void listenForever() {
        listening = Flux.defer(() -> {
                    PostgresqlConnection current = connection.get();
                    return current == null ? Flux.<Notification>error(new IllegalStateException("not connected"))
                            : current.getNotifications();
                })
                .doOnNext(this::onNotification)
                // The notifications end when the connection does: reconnect and listen again.
                .then(Mono.error(new IllegalStateException("poke connection closed")))
                .onErrorResume(error -> {
                    connection.set(null);
                    if (!closed.get() && outageLogged.compareAndSet(false, true)) {
                        log.warn("poke channel {} lost ({}); falling back to polling while reconnecting",
                                sql.channel(), error.toString());
                    }
                    return listenOnce().then(Mono.error(error));
                })
                .retryWhen(Retry.backoff(Long.MAX_VALUE, Duration.ofMillis(100)).maxBackoff(Duration.ofSeconds(5))
                        .filter(error -> !closed.get()))
                .subscribe(null, error -> {
                    if (!closed.get()) {
                        log.error("poke listener stopped", error);
                    }
                });
    }

    private void onNotification(Notification notification) {
        String payload = notification.getParameter();
        if (payload == null) {
            return;
        }
        int bar = payload.indexOf('|');
        if (bar < 0) {
            return;
        }
        String from = payload.substring(0, bar);
        if (!from.equals(origin)) {
            local.poke(payload.substring(bar + 1));
        }
    }

    private static ConnectionFactory unwrap(ConnectionFactory factory) {
        ConnectionFactory current = factory;
        while (current instanceof Wrapped<?> wrapped && wrapped.unwrap() instanceof ConnectionFactory inner) {
            current = inner;
        }
        return current;
    }

    private static PostgresqlConnection unwrapConnection(Connection created) {
        Connection current = created;
        while (!(current instanceof PostgresqlConnection) && current instanceof Wrapped<?> wrapped
                && wrapped.unwrap() instanceof Connection inner) {
            current = inner;
        }
        if (current instanceof PostgresqlConnection pg) {
            return pg;
        }
        throw new IllegalStateException("the LISTEN/NOTIFY poke transport needs r2dbc-postgresql connections,"
                + " got " + created.getClass().getName());
    }

    @Override
    public String toString() {
        return "PostgresNotifyPokeTransport{channel=" + sql.channel() + "}";
    }
}
