package dev.durable.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Option;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The engine's own connections start their transactions in READ COMMITTED whatever the role's default. */
@ExtendWith(PostgresExtension.class)
class ReadCommittedConnectionsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @Test
    void aConnectionOfARepeatableReadDefaultStartsItsTransactionsReadCommitted(TestDatabase db) {
        ConnectionFactory repeatable = ConnectionFactories.get(ConnectionFactoryOptions.parse(db.url()).mutate()
                .option(Option.valueOf("options"), Map.of("default_transaction_isolation", "repeatable read"))
                .build());
        assertThat(isolation(repeatable)).isEqualTo("repeatable read");
        assertThat(isolation(new ReadCommittedConnections(repeatable))).isEqualTo("read committed");
    }

    private static String isolation(ConnectionFactory factory) {
        Connection connection = Mono.from(factory.create()).block(WAIT);
        try {
            Mono.from(connection.beginTransaction()).block(WAIT);
            String level = Flux.from(connection.createStatement("SELECT current_setting('transaction_isolation')")
                            .execute())
                    .concatMap(result -> result.map(row -> row.get(0, String.class)))
                    .blockLast(WAIT);
            Mono.from(connection.rollbackTransaction()).block(WAIT);
            return level;
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }
}
