package dev.durable.internal;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.Result;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The engine's own connections, each set once when it is opened to start its transactions in READ
 * COMMITTED, whatever the server's or role's default: the engine's statements (and the elections
 * their triggers run) are written for it. A pool over this pays the statement once per connection,
 * not once per use.
 */
public final class ReadCommittedConnections implements ConnectionFactory {

    private static final String READ_COMMITTED =
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED";

    private final ConnectionFactory target;

    public ReadCommittedConnections(ConnectionFactory target) {
        this.target = target;
    }

    @Override
    public Mono<Connection> create() {
        return Mono.from(target.create()).flatMap(connection -> Flux.from(connection.createStatement(READ_COMMITTED)
                        .execute())
                .concatMap(Result::getRowsUpdated)
                .then(Mono.just(connection))
                .onErrorResume(error -> Mono.from(connection.close()).then(Mono.error(error))));
    }

    @Override
    public ConnectionFactoryMetadata getMetadata() {
        return target.getMetadata();
    }
}
