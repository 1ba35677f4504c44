package dev.durable.support;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The proxy's faults at the socket level, against a plain loopback server of the test's own. */
class TcpProxyTest {

    private static final Duration WAIT = Duration.ofSeconds(30);
    /** Long enough for bytes that were going to arrive to arrive; only a missed bug can pass by it. */
    private static final long QUIET_MILLIS = 200;

    private ServerSocket server;
    private Thread acceptor;
    private final BlockingQueue<Socket> serverSides = new LinkedBlockingQueue<>();
    private TcpProxy proxy;

    @BeforeEach
    void startServer() throws IOException {
        server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        acceptor = new Thread(() -> {
            try {
                while (true) {
                    serverSides.add(server.accept());
                }
            } catch (IOException closed) {
                // The test is over.
            }
        }, "tcp-proxy-test-server");
        acceptor.setDaemon(true);
        acceptor.start();
        proxy = TcpProxy.start("127.0.0.1", server.getLocalPort());
    }

    @AfterEach
    void stop() throws Exception {
        proxy.close();
        server.close();
        acceptor.join(WAIT.toMillis());
        for (Socket socket : serverSides) {
            socket.close();
        }
    }

    private Socket connect() throws IOException {
        Socket socket = new Socket(proxy.host(), proxy.port());
        socket.setSoTimeout((int) WAIT.toMillis());
        return socket;
    }

    private Socket serverSide() throws InterruptedException {
        Socket socket = serverSides.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertThat(socket).as("the server accepted the proxied connection").isNotNull();
        return socket;
    }

    private static void send(Socket socket, String text) throws IOException {
        socket.getOutputStream().write(text.getBytes(StandardCharsets.UTF_8));
        socket.getOutputStream().flush();
    }

    private static String receive(Socket socket, int length) throws IOException {
        socket.setSoTimeout((int) WAIT.toMillis());
        byte[] bytes = socket.getInputStream().readNBytes(length);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    @Test
    void forwardsBothWaysAndCountsTheBytes() throws Exception {
        try (Socket client = connect()) {
            Socket upstream = serverSide();
            send(client, "ping");
            assertThat(receive(upstream, 4)).isEqualTo("ping");
            send(upstream, "pong!");
            assertThat(receive(client, 5)).isEqualTo("pong!");

            assertThat(proxy.accepted()).isEqualTo(1);
            assertThat(proxy.bytesToTarget()).isEqualTo(4);
            assertThat(proxy.bytesToClient()).isEqualTo(5);
            TcpProxy.Link link = proxy.connections().get(0);
            assertThat(link.id()).isEqualTo(1);
            assertThat(link.bytesToTarget()).isEqualTo(4);
            assertThat(link.bytesToClient()).isEqualTo(5);
            assertThat(link.upstreamLocalPort()).isEqualTo(upstream.getPort());
            assertThat(proxy.linkByUpstreamPort(upstream.getPort())).contains(link);

            // A half-close passes through, and the answer still comes back the other way.
            client.shutdownOutput();
            assertThat(upstream.getInputStream().read()).isEqualTo(-1);
            send(upstream, "bye");
            assertThat(receive(client, 3)).isEqualTo("bye");
            upstream.close();
            assertThat(client.getInputStream().read()).isEqualTo(-1);
            Eventually.until("the finished link is gone", WAIT, () -> proxy.connections().isEmpty());
            Eventually.until("its pumps ended", WAIT, () -> threadsOf(proxy.name() + "-c1-") == 0);
        }
    }

    @Test
    void aFrozenLinkHoldsBytesBothWaysAndDeliversThemInOrderOnThaw() throws Exception {
        try (Socket client = connect()) {
            Socket upstream = serverSide();
            send(client, "a");
            assertThat(receive(upstream, 1)).isEqualTo("a");

            proxy.freeze();
            assertThat(proxy.connections().get(0).isFrozen()).isTrue();
            send(client, "bc");
            send(client, "de");
            send(upstream, "XY");
            Eventually.sleep(QUIET_MILLIS);
            assertThat(upstream.getInputStream().available()).isZero();
            assertThat(client.getInputStream().available()).isZero();
            assertThat(proxy.bytesToTarget()).isEqualTo(1);
            assertThat(proxy.bytesToClient()).isZero();

            proxy.thaw();
            assertThat(receive(upstream, 4)).isEqualTo("bcde");
            assertThat(receive(client, 2)).isEqualTo("XY");
            assertThat(proxy.bytesToTarget()).isEqualTo(5);
        }
    }

    @Test
    void freezingOneLinkLeavesTheOthersFlowing() throws Exception {
        try (Socket first = connect(); Socket second = connect()) {
            // Each link connects upstream on its own thread: pair the server's sockets by port.
            Socket oneUp = serverSide();
            Socket otherUp = serverSide();
            Eventually.until("two links", WAIT, () -> proxy.connections().size() == 2);
            TcpProxy.Link frozen = proxy.connections().get(0);
            Socket firstUp = frozen.upstreamLocalPort() == oneUp.getPort() ? oneUp : otherUp;
            Socket secondUp = firstUp == oneUp ? otherUp : oneUp;
            proxy.freeze(frozen);

            send(first, "held");
            send(second, "free");
            assertThat(receive(secondUp, 4)).isEqualTo("free");
            assertThat(firstUp.getInputStream().available()).isZero();
            assertThat(frozen.bytesToTarget()).isZero();

            proxy.thaw(frozen);
            assertThat(receive(firstUp, 4)).isEqualTo("held");
        }
    }

    @Test
    void aPartitionHoldsNewConnectionsAwayFromTheTargetUntilHealed() throws Exception {
        try (Socket before = connect()) {
            Socket beforeUp = serverSide();
            proxy.partition();
            try (Socket during = connect()) {
                send(during, "queued");
                send(before, "old");
                Eventually.until("the new connection was accepted", WAIT, () -> proxy.accepted() == 2);
                Eventually.sleep(QUIET_MILLIS);
                assertThat(serverSides).as("nothing reached the server").isEmpty();
                assertThat(beforeUp.getInputStream().available()).isZero();
                TcpProxy.Link held = proxy.connections().get(1);
                assertThat(held.upstreamConnected()).isFalse();
                assertThat(held.isFrozen()).isTrue();

                proxy.heal();
                Socket duringUp = serverSide();
                assertThat(receive(duringUp, 6)).isEqualTo("queued");
                assertThat(receive(beforeUp, 3)).isEqualTo("old");
            }
        }
    }

    @Test
    void resetSendsAnRstToBothSides() throws Exception {
        try (Socket client = connect()) {
            Socket upstream = serverSide();
            send(client, "x");
            assertThat(receive(upstream, 1)).isEqualTo("x");

            proxy.reset();
            assertThat(proxy.connections()).isEmpty();
            assertThatThrownBy(() -> readUntilEnd(client.getInputStream()))
                    .isInstanceOf(SocketException.class).hasMessageContaining("reset");
            assertThatThrownBy(() -> readUntilEnd(upstream.getInputStream()))
                    .isInstanceOf(SocketException.class).hasMessageContaining("reset");
        }
    }

    @Test
    void closeAllEndsConnectionsGracefully() throws Exception {
        try (Socket client = connect()) {
            Socket upstream = serverSide();
            proxy.closeAll();
            assertThat(client.getInputStream().read()).isEqualTo(-1);
            assertThat(upstream.getInputStream().read()).isEqualTo(-1);
        }
    }

    @Test
    void refusingResetsNewConnectionsAndLeavesLiveOnesAlone() throws Exception {
        try (Socket live = connect()) {
            Socket liveUp = serverSide();
            proxy.refuseNew(true);
            try (Socket refused = connect()) {
                assertThatThrownBy(() -> readUntilEnd(refused.getInputStream())).isInstanceOf(SocketException.class);
            }
            assertThat(proxy.refused()).isEqualTo(1);
            assertThat(proxy.accepted()).isEqualTo(2);
            send(live, "still");
            assertThat(receive(liveUp, 5)).isEqualTo("still");
            assertThat(serverSides).isEmpty();

            proxy.refuseNew(false);
            try (Socket again = connect()) {
                send(again, "ok");
                assertThat(receive(serverSide(), 2)).isEqualTo("ok");
            }
        }
    }

    @Test
    void latencyDelaysButDeliversEverything() throws Exception {
        proxy.latency(Duration.ofMillis(50));
        try (Socket client = connect()) {
            Socket upstream = serverSide();
            byte[] payload = new byte[200_000];
            Arrays.fill(payload, (byte) 7);
            client.getOutputStream().write(payload);
            upstream.setSoTimeout((int) WAIT.toMillis());
            assertThat(upstream.getInputStream().readNBytes(payload.length)).isEqualTo(payload);
            proxy.latency(Duration.ZERO);
            send(upstream, "done");
            assertThat(receive(client, 4)).isEqualTo("done");
        }
        assertThatThrownBy(() -> proxy.latency(Duration.ofMillis(-1))).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aTargetThatIsDownLooksDownThroughTheProxy() throws Exception {
        int freePort;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            freePort = probe.getLocalPort();
        }
        try (TcpProxy nowhere = TcpProxy.start("127.0.0.1", freePort); Socket client = new Socket(nowhere.host(), nowhere.port())) {
            client.setSoTimeout((int) WAIT.toMillis());
            assertThatThrownBy(() -> readUntilEnd(client.getInputStream())).isInstanceOf(SocketException.class);
            Eventually.until("the failed link is gone", WAIT, () -> nowhere.connections().isEmpty());
        }
    }

    @Test
    void closeEndsEveryThreadAndStopsListening() throws Exception {
        Socket client = connect();
        Socket frozen = connect();
        // Held to the end: a server-side socket the test dropped is closed by the JDK's cleaner when a
        // collection finds it, and its link's pump then reads the end and stops (a loaded CI run's
        // collection did: four threads, not six; reproduced with System.gc() here).
        Socket clientUp = serverSide();
        Socket frozenUp = serverSide();
        Eventually.until("two links", WAIT, () -> proxy.connections().size() == 2);
        proxy.freeze(proxy.connections().get(1));
        proxy.partition();
        Socket held = connect();
        Eventually.until("three links", WAIT, () -> proxy.connections().size() == 3);
        // The acceptor, two pumps for each connected link, and the held link's waiting one.
        Eventually.until("every thread started", WAIT, () -> threadsOf(proxy.name() + "-"), n -> n == 1 + 2 * 2 + 1);

        proxy.close();
        proxy.close();
        assertThat(threadsOf(proxy.name() + "-")).isZero();
        assertThat(proxy.connections()).isEmpty();
        for (Socket socket : new Socket[] {client, frozen, held}) {
            assertThat(socket.getInputStream().read()).isEqualTo(-1);
            socket.close();
        }
        clientUp.close();
        frozenUp.close();
        assertThatThrownBy(() -> new Socket(proxy.host(), proxy.port()).close()).isInstanceOf(ConnectException.class);
    }

    @Test
    void urlsPointAtTheProxyAndKeepEverythingElse() {
        String pg = "r2dbc:postgresql://user:p%40ss@localhost:" + server.getLocalPort() + "/db?sslMode=disable";
        String local = proxy.host() + ":" + proxy.port();
        assertThat(proxy.proxiedUrl(pg)).isEqualTo("r2dbc:postgresql://user:p%40ss@" + local + "/db?sslMode=disable");
        assertThat(proxy.proxiedUrl("redis://:secret@localhost:" + server.getLocalPort() + "/2"))
                .isEqualTo("redis://:secret@" + local + "/2");
        assertThat(proxy.proxiedUrl("redis://127.0.0.1:" + server.getLocalPort()))
                .isEqualTo("redis://" + local);

        assertThat(TcpProxy.rewrite("postgresql://u:a@b@db.example:5433/x", "h", 1)).isEqualTo("postgresql://u:a@b@h:1/x");
        assertThat(TcpProxy.rewrite("r2dbc:postgresql://u:p@[::1]:5432/x", "h", 1)).isEqualTo("r2dbc:postgresql://u:p@h:1/x");
        assertThat(TcpProxy.rewrite("r2dbc:postgresql://localhost/x", "h", 1)).isEqualTo("r2dbc:postgresql://h:1/x");
        assertThat(TcpProxy.rewrite("rediss://localhost", "h", 1)).isEqualTo("rediss://h:1");

        assertThatThrownBy(() -> proxy.proxiedUrl("redis://localhost:1"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("port 1");
        assertThatThrownBy(() -> TcpProxy.rewrite("r2dbc:postgresql://u:secret@a:1,b:2/x", "h", 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageNotContaining("secret");
        assertThatThrownBy(() -> TcpProxy.rewrite("mem:nothing", "h", 1)).isInstanceOf(IllegalArgumentException.class);
    }

    private static void readUntilEnd(InputStream in) throws IOException {
        while (in.read() >= 0) {
            // Drain until the end or the error the test expects.
        }
    }

    static long threadsOf(String prefix) {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(thread -> thread.isAlive() && thread.getName().startsWith(prefix)).count();
    }
}
