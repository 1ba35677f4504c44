package dev.durable.internal;

import dev.durable.EngineOptions;
import dev.durable.Urls;
import dev.durable.internal.sql.RegistrySql;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The engine's connections: a pool of its own, made from the URL (every statement bounded by the
 * server's statement timeout, every acquire by the pool's, each connection set to READ COMMITTED
 * once), or the connection factory the user gave it, which the engine then neither configures nor
 * closes.
 */
public final class EngineConnections {

    private static final Logger log = Loggers.getLogger(EngineConnections.class);

    private final String engine;
    private final @Nullable ConnectionPool ownPool;
    private final ConnectionFactory factory;

    public EngineConnections(EngineOptions options) {
        this.engine = options.name();
        if (options.connectionFactory() != null) {
            this.ownPool = null;
            this.factory = options.connectionFactory();
            return;
        }
        ConnectionFactory target;
        try {
            // The server cuts a statement that runs past the bound; the pool never waits past its own.
            target = ConnectionFactories.get(ConnectionFactoryOptions.parse(options.url()).mutate()
                    .option(ConnectionFactoryOptions.STATEMENT_TIMEOUT, options.statementTimeout())
                    .build());
        } catch (RuntimeException unusable) {
            // The driver's message quotes the whole URL, password included: mask it, drop the cause.
            throw new IllegalArgumentException("url is not a usable R2DBC URL: "
                    + Urls.maskedIn(unusable.getMessage(), options.url()));
        }
        this.ownPool = new ConnectionPool(ConnectionPoolConfiguration.builder(new ReadCommittedConnections(target))
                .name("durable-" + options.name())
                .initialSize(1)
                .maxSize(options.poolMaxSize())
                .maxIdleTime(Duration.ofMinutes(5))
                .maxAcquireTime(options.acquireTimeout())
                .maxCreateConnectionTime(options.acquireTimeout())
                .maxValidationTime(options.acquireTimeout())
                .build());
        this.factory = ownPool;
    }

    /** Where every statement of the engine gets its connection. */
    public ConnectionFactory factory() {
        return factory;
    }

    /**
     * The engine's statements are written for READ COMMITTED: its own pool is set to it
     * ({@link ReadCommittedConnections}); a connection factory given to it is asked once, and a
     * warning says what to set when it defaults to another level.
     */
    public Mono<Void> warnUnlessReadCommitted(RegistrySql registry) {
        if (ownPool != null) {
            return Mono.empty();
        }
        return registry.defaultIsolation().doOnNext(isolation -> {
            if (!"read committed".equals(isolation)) {
                log.warn("Durable engine {}: its connections start transactions in {}, not read committed;"
                        + " the engine's statements are written for read committed (a key election may then"
                        + " miss a row until the key healer's next pass, an update may fail a serialization"
                        + " check and go again). Set default_transaction_isolation on the connection"
                        + " factory given to the engine.", engine, isolation);
            }
        }).then();
    }

    /** Disposes the engine's own pool within {@code bound} (a given connection factory is the user's to close). */
    public Mono<Void> close(Duration bound) {
        return Mono.defer(() -> ownPool == null ? Mono.<Void>empty() : ownPool.disposeLater())
                .timeout(bound, Mono.fromRunnable(() -> log.warn(
                        "engine {}: connection pool not disposed within {}", engine, bound)));
    }
}
