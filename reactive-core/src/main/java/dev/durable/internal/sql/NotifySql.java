package dev.durable.internal.sql;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The statements of the LISTEN/NOTIFY poke transport: one channel per schema, so engines on other
 * schemas of the same database never hear each other's pokes.
 */
public final class NotifySql {

    /**
     * Sends a poke on the channel. NOTIFY is transactional: on a caller's connection inside its
     * transaction, PostgreSQL delivers it when the transaction commits, never on rollback. Index:
     * none. Locks: none (a short global lock on the notification queue at commit).
     */
    private static final String NOTIFY = "SELECT pg_notify($1, $2)";

    private final String channel;
    /** Subscribes a dedicated (unpooled) connection to the channel. Index: none. Locks: none. */
    private final String listen;

    public NotifySql(String schema) {
        // Channel names are identifiers: PostgreSQL cuts them at 63 bytes. Pokes are hints, so two
        // very long schema names sharing a channel only costs an empty pick now and then.
        String name = "durable_poke_" + schema;
        this.channel = name.length() > 63 ? name.substring(0, 63) : name;
        this.listen = "LISTEN \"" + channel + "\"";
    }

    public String channel() {
        return channel;
    }

    /** Sends {@code payload} on this schema's channel over {@code connection}. */
    public Mono<Void> notify(Connection connection, String payload) {
        return Flux.from(connection.createStatement(NOTIFY).bind(0, channel).bind(1, payload).execute())
                .flatMap(Result::getRowsUpdated)
                .then();
    }

    /** Starts listening on this schema's channel on {@code connection} (a dedicated one). */
    public Mono<Void> listen(Connection connection) {
        return Flux.from(connection.createStatement(listen).execute())
                .flatMap(Result::getRowsUpdated)
                .then();
    }
}
