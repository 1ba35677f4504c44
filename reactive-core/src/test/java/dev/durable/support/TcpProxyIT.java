package dev.durable.support;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.testing.TestPostgres;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Row;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The proxy between R2DBC and the real PostgreSQL: each fault has the effect a test of the engine
 * relies on. Outcomes only: a held statement is checked not done after a pause (a fault that works
 * can never finish it early), and every wait for an answer has a generous cap.
 */
class TcpProxyIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final long QUIET_MILLIS = 300;

    private final List<Connection> opened = new ArrayList<>();
    private final List<Integer> sleepers = new ArrayList<>();
    private TcpProxy proxy;
    private ConnectionFactory proxied;
    private Connection direct;

    @BeforeEach
    void setUp() {
        String url = TestPostgres.url();
        proxy = TcpProxy.forUrl(url);
        proxied = ConnectionFactories.get(proxy.proxiedUrl(url));
        direct = Mono.from(ConnectionFactories.get(url).create()).block(WAIT);
    }

    @AfterEach
    void tearDown() {
        try {
            proxy.close();
        } finally {
            // Backends a reset left running (PostgreSQL does not notice a dead client mid-sleep).
            for (int pid : sleepers) {
                value(direct, "SELECT pg_terminate_backend(" + pid + ")", row -> row.get(0, Boolean.class));
            }
            for (Connection connection : opened) {
                Mono.from(connection.close()).onErrorResume(e -> Mono.empty()).block(WAIT);
            }
            Mono.from(direct.close()).block(WAIT);
        }
    }

    private Connection openProxied() {
        Connection connection = Mono.from(proxied.create()).block(WAIT);
        opened.add(connection);
        return connection;
    }

    private static <T> Mono<T> query(Connection connection, String sql, Function<Row, T> column) {
        return Flux.from(connection.createStatement(sql).execute())
                .flatMap(result -> result.map((row, meta) -> column.apply(row)))
                .single();
    }

    private static <T> T value(Connection connection, String sql, Function<Row, T> column) {
        return query(connection, sql, column).block(WAIT);
    }

    private static int intOf(Row row) {
        return row.get(0, Integer.class);
    }

    private static <T> T await(CompletableFuture<T> future) throws Exception {
        return future.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    /** What PostgreSQL says the backend is doing, from a connection that does not pass the proxy. */
    private String activity(int pid) {
        return value(direct, "SELECT coalesce(state, '') || '/' || coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = "
                + pid + " UNION ALL SELECT 'gone/' WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = " + pid + ")",
                row -> row.get(0, String.class));
    }

    @Test
    void aQueryGoesThroughAndTheLinkEndsWithTheConnection() {
        Connection connection = openProxied();
        assertThat(value(connection, "SELECT 1", TcpProxyIT::intOf)).isEqualTo(1);
        assertThat(proxy.accepted()).isEqualTo(1);
        List<TcpProxy.Link> links = proxy.connections();
        assertThat(links).hasSize(1);
        assertThat(links.get(0).bytesToTarget()).isPositive();
        assertThat(links.get(0).bytesToClient()).isPositive();
        int port = value(connection, "SELECT inet_client_port()", TcpProxyIT::intOf);
        assertThat(proxy.linkByUpstreamPort(port)).contains(links.get(0));

        Mono.from(connection.close()).block(WAIT);
        opened.remove(connection);
        Eventually.until("the link is gone", WAIT, () -> proxy.connections().isEmpty());
        Eventually.until("its pumps ended", WAIT, () -> TcpProxyTest.threadsOf(proxy.name() + "-c1-") == 0);
    }

    @Test
    void aFrozenLinkHoldsTheStatementUntilThawed() throws Exception {
        Connection connection = openProxied();
        assertThat(value(connection, "SELECT 1", TcpProxyIT::intOf)).isEqualTo(1);
        TcpProxy.Link link = proxy.connections().get(0);

        proxy.freeze();
        long sent = link.bytesToTarget();
        CompletableFuture<Integer> answer = query(connection, "SELECT 41 + 1", TcpProxyIT::intOf).toFuture();
        Eventually.sleep(QUIET_MILLIS);
        assertThat(answer).isNotDone();
        assertThat(link.bytesToTarget()).as("nothing reached the server").isEqualTo(sent);

        proxy.thaw();
        assertThat(await(answer)).isEqualTo(42);
    }

    @Test
    void aLinkFrozenMidStatementHoldsTheServersAnswer() throws Exception {
        Connection connection = openProxied();
        int pid = value(connection, "SELECT pg_backend_pid()", TcpProxyIT::intOf);
        long key = ThreadLocalRandom.current().nextLong(1, Long.MAX_VALUE);
        // The direct session holds a lock the proxied statement waits on: the statement is surely
        // running in the server when the link freezes, and ends when the lock is let go.
        value(direct, "SELECT 1 FROM (SELECT pg_advisory_lock(" + key + ")) AS locked", TcpProxyIT::intOf);
        CompletableFuture<Integer> answer = query(connection,
                "SELECT 7 FROM (SELECT pg_advisory_xact_lock(" + key + ")) AS locked", TcpProxyIT::intOf).toFuture();
        Eventually.until("the statement waits on the lock", WAIT, () -> activity(pid), a -> a.equals("active/advisory"));
        proxy.freeze();
        long received = proxy.connections().get(0).bytesToClient();

        value(direct, "SELECT pg_advisory_unlock(" + key + ")", row -> row.get(0, Boolean.class));
        Eventually.until("the server finished the statement", WAIT, () -> activity(pid), a -> a.startsWith("idle/"));
        Eventually.sleep(QUIET_MILLIS);
        assertThat(answer).isNotDone();
        assertThat(proxy.connections().get(0).bytesToClient()).as("the answer is held").isEqualTo(received);

        proxy.thaw();
        assertThat(await(answer)).isEqualTo(7);
    }

    @Test
    void aResetFailsTheStatementInFlight() throws Exception {
        Connection connection = openProxied();
        int pid = value(connection, "SELECT pg_backend_pid()", TcpProxyIT::intOf);
        sleepers.add(pid);
        // Far longer than the cap below: only the reset can end it in time.
        CompletableFuture<Integer> answer = query(connection, "SELECT 1 FROM pg_sleep(600)", TcpProxyIT::intOf).toFuture();
        Eventually.until("the statement is sleeping", WAIT, () -> activity(pid), a -> a.equals("active/PgSleep"));

        proxy.reset();
        assertThat(proxy.connections()).isEmpty();
        assertThatThrownBy(() -> await(answer)).isInstanceOf(ExecutionException.class);
        assertThat(answer).isCompletedExceptionally();
    }

    @Test
    void aPartitionHoldsOldAndNewConnectionsUntilHealed() throws Exception {
        Connection before = openProxied();
        assertThat(value(before, "SELECT 1", TcpProxyIT::intOf)).isEqualTo(1);

        proxy.partition();
        CompletableFuture<Integer> old = query(before, "SELECT 1", TcpProxyIT::intOf).toFuture();
        CompletableFuture<Integer> fresh = Mono.usingWhen(proxied.create(),
                (Connection c) -> query(c, "SELECT 2", TcpProxyIT::intOf), Connection::close).toFuture();
        Eventually.until("the new connection was accepted", WAIT, () -> proxy.accepted() == 2);
        Eventually.sleep(QUIET_MILLIS);
        assertThat(old).isNotDone();
        assertThat(fresh).isNotDone();
        TcpProxy.Link held = proxy.connections().get(1);
        assertThat(held.upstreamConnected()).as("the server never saw it").isFalse();
        assertThat(held.bytesToTarget()).isZero();

        proxy.heal();
        assertThat(await(old)).isEqualTo(1);
        assertThat(await(fresh)).isEqualTo(2);
        assertThat(value(before, "SELECT 3", TcpProxyIT::intOf)).isEqualTo(3);
    }

    @Test
    void latencySlowsTheLinkButTheAnswersStayRight() {
        Connection connection = openProxied();
        proxy.latency(Duration.ofMillis(100));
        for (int i = 0; i < 3; i++) {
            assertThat(value(connection, "SELECT " + i, TcpProxyIT::intOf)).isEqualTo(i);
        }
        // A new connection's handshake crosses the delay too.
        Connection slow = openProxied();
        assertThat(value(slow, "SELECT count(*)::int FROM generate_series(1, 50000)", TcpProxyIT::intOf)).isEqualTo(50_000);
        proxy.latency(Duration.ZERO);
        assertThat(value(connection, "SELECT 9", TcpProxyIT::intOf)).isEqualTo(9);
    }

    @Test
    void aPoolKeepsAnsweringOnItsOtherConnectionsWhileOneIsFrozen() throws Exception {
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(proxied)
                .initialSize(3).maxSize(3).maxAcquireTime(WAIT).build());
        try {
            Connection stuck = Mono.from(pool.create()).block(WAIT);
            try {
                int stuckPort = value(stuck, "SELECT inet_client_port()", TcpProxyIT::intOf);
                TcpProxy.Link link = proxy.linkByUpstreamPort(stuckPort).orElseThrow();
                proxy.freeze(link);
                CompletableFuture<Integer> held = query(stuck, "SELECT 5", TcpProxyIT::intOf).toFuture();

                List<Integer> ports = Flux.range(0, 30)
                        .flatMap(i -> Mono.usingWhen(pool.create(),
                                (Connection c) -> query(c, "SELECT inet_client_port()", TcpProxyIT::intOf),
                                Connection::close), 2)
                        .collectList()
                        .block(WAIT);
                assertThat(ports).hasSize(30).doesNotContain(stuckPort);
                assertThat(held).isNotDone();

                proxy.thaw(link);
                assertThat(await(held)).isEqualTo(5);
            } finally {
                Mono.from(stuck.close()).block(WAIT);
            }
        } finally {
            pool.disposeLater().block(WAIT);
        }
    }

    @Test
    void closingTheProxyLeavesNoThreadNoSocketAndNoBackend() {
        Connection idle = openProxied();
        Connection frozen = openProxied();
        List<Integer> ports = new ArrayList<>();
        for (Connection connection : List.of(idle, frozen)) {
            ports.add(value(connection, "SELECT inet_client_port()", TcpProxyIT::intOf));
        }
        proxy.freeze(proxy.linkByUpstreamPort(ports.get(1)).orElseThrow());
        proxy.partition();
        CompletableFuture<Connection> held = Mono.<Connection>from(proxied.create()).toFuture();
        Eventually.until("three links", WAIT, () -> proxy.connections().size() == 3);

        proxy.close();
        assertThat(TcpProxyTest.threadsOf(proxy.name() + "-")).isZero();
        assertThat(proxy.connections()).isEmpty();
        String portList = ports.toString().replace('[', '(').replace(']', ')');
        Eventually.until("the proxied backends ended", WAIT,
                () -> value(direct, "SELECT count(*)::int FROM pg_stat_activity WHERE client_port IN " + portList,
                        TcpProxyIT::intOf),
                count -> count == 0);
        assertThatThrownBy(() -> held.get(WAIT.toSeconds(), TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class);
        assertThatThrownBy(() -> value(idle, "SELECT 1", TcpProxyIT::intOf)).isInstanceOf(RuntimeException.class);
    }
}
