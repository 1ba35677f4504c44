package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.EngineOptions;
import dev.durable.poke.PokeContext;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.support.Eventually;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.ConnectionFactory;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.reactivestreams.Publisher;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** The transport on its own against a real Redis: delivery, echo, schema isolation, coalescing, no Redis. */
@ExtendWith(RedisExtension.class)
class RedisPokeTransportIT {

    private static final Duration WAIT = Duration.ofSeconds(10);
    /** Never connected to: the Redis transport does not use the database. */
    private static final ConnectionFactory NO_DATABASE = new ConnectionFactory() {
        @Override
        public Publisher<? extends Connection> create() {
            return Mono.error(new UnsupportedOperationException("no database in this test"));
        }

        @Override
        public ConnectionFactoryMetadata getMetadata() {
            return () -> "none";
        }
    };

    private final List<RedisPokeTransport> transports = new ArrayList<>();
    private final List<Disposable> subscriptions = new ArrayList<>();

    @AfterEach
    void closeAll() {
        subscriptions.forEach(Disposable::dispose);
        transports.forEach(t -> t.close().block(WAIT));
    }

    private RedisPokeTransport start(PokeTransportFactory factory, String origin, String schema) {
        RedisPokeTransport transport = (RedisPokeTransport) factory.create(new PokeContext(origin, NO_DATABASE, schema,
                EngineOptions.DEFAULT_CALL_TIMEOUT))
                .block(WAIT);
        transports.add(transport);
        return transport;
    }

    private Queue<String> record(RedisPokeTransport transport) {
        Queue<String> seen = new ConcurrentLinkedQueue<>();
        subscriptions.add(transport.pokes().subscribe(seen::add, error -> seen.add("error: " + error)));
        return seen;
    }

    @Test
    void aPokeReachesTheOtherEngineOnceAndItsSenderAtOnceIgnoringTheEcho(TestRedisServer redis) {
        PokeTransportFactory factory = RedisPokeTransports.redis(redis.uri());
        RedisPokeTransport a = start(factory, "a", "shop");
        RedisPokeTransport b = start(factory, "b", "shop");
        RedisPokeTransport otherSchema = start(factory, "c", "billing");
        Queue<String> seenByA = record(a);
        Queue<String> seenByB = record(b);
        Queue<String> seenByOther = record(otherSchema);

        a.poke("orders");
        assertThat(seenByA).as("local delivery is synchronous").containsExactly("orders");
        Eventually.until("b poked", WAIT, () -> seenByB.contains("orders"));
        // Redis may deliver the echo before the publish's reply: wait for both.
        Eventually.until("a heard its echo", WAIT, () -> a.stats().echoesIgnored() == 1 && a.stats().published() == 1);

        assertThat(seenByA).as("the echo is not delivered again").containsExactly("orders");
        assertThat(seenByB).containsExactly("orders");
        assertThat(a.stats().published()).isEqualTo(1);
        assertThat(b.stats().received()).isEqualTo(1);
        assertThat(b.stats().echoesIgnored()).isZero();
        assertThat(seenByOther).as("another schema's channel").isEmpty();
        assertThat(otherSchema.stats().received()).isZero();
        assertThat(a.channel()).isEqualTo("durable:poke:shop");
    }

    @Test
    void aBurstOfPokesOfOneQueueGoesOutAsOneMessage(TestRedisServer redis) {
        PokeTransportFactory factory = RedisPokeTransports.redis(redis.redisUri(),
                RedisPokeOptions.builder().coalesceWindow(Duration.ofMillis(300)).build());
        RedisPokeTransport a = start(factory, "a", "burst");
        RedisPokeTransport b = start(factory, "b", "burst");
        Queue<String> seenByA = record(a);
        Queue<String> seenByB = record(b);

        for (int i = 0; i < 50; i++) {
            a.poke("q");
        }
        a.poke("other");
        assertThat(seenByA).hasSize(51);
        Eventually.until("both queues reached b", WAIT, () -> seenByB.contains("q") && seenByB.contains("other"));
        Eventually.until("echoes back", WAIT, () -> a.stats().echoesIgnored() == 2 && a.stats().published() >= 2);
        Eventually.sleep(400); // past another window: nothing more goes out
        assertThat(a.stats().published()).isEqualTo(2);
        assertThat(a.stats().echoesIgnored()).isEqualTo(2);
        assertThat(seenByB).containsExactlyInAnyOrder("q", "other");
    }

    @Test
    void withoutRedisTheTransportStillStartsPokesLocallyAndCloses() throws IOException {
        int closedPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            closedPort = socket.getLocalPort();
        }
        RedisPokeTransport lonely = start(RedisPokeTransports.redis("redis://127.0.0.1:" + closedPort), "a", "down");
        Queue<String> seen = record(lonely);

        lonely.poke("q");
        assertThat(seen).containsExactly("q");
        Eventually.until("the lost poke counted", WAIT, () -> lonely.stats().notSent() == 1);
        assertThat(lonely.stats().published()).isZero();
    }
}
