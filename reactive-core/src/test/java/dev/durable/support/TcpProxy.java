package dev.durable.support;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * A TCP proxy a test controls, to put network faults between a client (the engine's pool, a
 * Lettuce client) and its server (PostgreSQL, Redis). It listens on an ephemeral loopback port and
 * forwards each accepted connection to the target over an upstream socket of its own; each
 * proxied connection is a {@link Link} that faults can address one at a time or all together.
 *
 * <p>The faults it models:
 * <ul>
 *   <li><b>half-open / stalled connection</b>: {@link #freeze(Link)} (or {@link #freeze()} for
 *       all) stops forwarding both ways while both sockets stay open. Neither side sees an error,
 *       only silence, as when a peer's host vanishes or a middlebox drops the flow. Bytes sent
 *       meanwhile are held (in the proxy and the kernel's buffers, so a sender eventually blocks
 *       as on a zero window) and delivered in order on {@link #thaw()};</li>
 *   <li><b>network partition</b>: {@link #partition()} freezes every connection and holds new
 *       ones: they are accepted (the client's connect succeeds) but nothing reaches the target
 *       until {@link #heal()};</li>
 *   <li><b>slow network / slow database</b>: {@link #latency(Duration)} delays every chunk, each
 *       direction, so a request-response round trip costs at least twice the latency;</li>
 *   <li><b>connection reset</b>: {@link #reset(Link)} (or {@link #reset()}) closes both sockets
 *       with an RST (SO_LINGER 0), as a crashed peer or a firewall would; {@link #refuseNew(boolean)}
 *       answers new connections with an RST at once, the nearest a listening proxy gets to a
 *       refused connect; {@link #closeAll()} closes gracefully (FIN) instead.</li>
 * </ul>
 *
 * <p>How a test uses it:
 * <pre>{@code
 * try (TcpProxy proxy = TcpProxy.forUrl(TestPostgres.url())) {
 *     ConnectionFactory factory = ConnectionFactories.get(proxy.proxiedUrl(TestPostgres.url()));
 *     // ... open connections, then pick one by PostgreSQL's inet_client_port():
 *     TcpProxy.Link link = proxy.linkByUpstreamPort(clientPort).orElseThrow();
 *     proxy.freeze(link);      // its statement hangs; the pool's other connections still answer
 *     proxy.thaw();            // it completes with the held answer
 * }
 * }</pre>
 * Assert outcomes (an answer, an error, a count of links or bytes), never elapsed time.
 *
 * <p>Test code: plain blocking sockets, one accept thread and two pump threads per connection,
 * all named after {@link #name()} and daemons. {@link #close()} closes every socket and waits for
 * every thread, and fails if one outlives a generous bound, so a leak shows in the test.
 */
public final class TcpProxy implements AutoCloseable {

    private static final AtomicInteger PROXIES = new AtomicInteger();
    private static final int CHUNK = 16 * 1024;
    private static final int CONNECT_TIMEOUT_MILLIS = 10_000;
    private static final Duration THREAD_EXIT_BOUND = Duration.ofSeconds(20);

    private final String name;
    private final InetSocketAddress target;
    private final ServerSocket server;

    // One lock for every fault switch; pumps wait on its condition and recheck after any change.
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final List<Link> live = new ArrayList<>();
    private final Set<Thread> threads = new HashSet<>();
    private boolean partitioned;
    private boolean refusing;
    private long latencyNanos;
    private boolean closed;

    private final AtomicInteger linkIds = new AtomicInteger();
    private final AtomicLong accepted = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong bytesToTarget = new AtomicLong();
    private final AtomicLong bytesToClient = new AtomicLong();

    private TcpProxy(String targetHost, int targetPort) throws IOException {
        this.name = "tcp-proxy-" + PROXIES.incrementAndGet();
        this.target = new InetSocketAddress(targetHost, targetPort);
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        startThread(name + "-accept", this::acceptLoop);
    }

    /** A proxy on an ephemeral loopback port, forwarding to the target. */
    public static TcpProxy start(String targetHost, int targetPort) {
        if (targetPort < 1 || targetPort > 65535) {
            throw new IllegalArgumentException("targetPort must be 1..65535, was " + targetPort);
        }
        try {
            return new TcpProxy(targetHost, targetPort);
        } catch (IOException e) {
            throw new IllegalStateException("the proxy could not listen", e);
        }
    }

    /**
     * A proxy to the server a URL names: {@code r2dbc:postgresql://}, {@code postgresql://},
     * {@code redis://} or {@code rediss://} (their default ports when the URL has none).
     */
    public static TcpProxy forUrl(String url) {
        Authority authority = Authority.of(url);
        return start(authority.host(), authority.port());
    }

    /** The proxy's name, which prefixes the name of each of its threads. */
    public String name() {
        return name;
    }

    /** The loopback port the proxy listens on. */
    public int port() {
        return server.getLocalPort();
    }

    /** The loopback host to connect to (the address the proxy listens on). */
    public String host() {
        return server.getInetAddress().getHostAddress();
    }

    /**
     * The same URL pointing at this proxy instead of the server: user, password, path and query
     * are kept, only {@code host:port} changes. The URL must name this proxy's target port.
     */
    public String proxiedUrl(String url) {
        Authority authority = Authority.of(url);
        if (authority.port() != target.getPort()) {
            throw new IllegalArgumentException("the URL names port " + authority.port()
                    + " but the proxy forwards to " + target.getPort());
        }
        return authority.replaceHostPort(host() + ":" + port());
    }

    /**
     * The URL with its {@code host:port} replaced, for {@code r2dbc:postgresql://},
     * {@code postgresql://}, {@code redis://} and the like; the password may be percent-encoded or
     * hold a raw {@code @}, not a raw {@code /}.
     */
    public static String rewrite(String url, String host, int port) {
        return Authority.of(url).replaceHostPort(host + ":" + port);
    }

    /** The live connections, in the order they were accepted. */
    public List<Link> connections() {
        lock.lock();
        try {
            return List.copyOf(live);
        } finally {
            lock.unlock();
        }
    }

    /**
     * The live connection whose upstream socket has this local port: the port PostgreSQL reports
     * as {@code inet_client_port()} and {@code pg_stat_activity.client_port}, and Redis in
     * {@code CLIENT LIST}'s {@code addr}.
     */
    public Optional<Link> linkByUpstreamPort(int port) {
        return connections().stream().filter(link -> link.upstreamLocalPort() == port).findFirst();
    }

    /** Connections accepted since the start, refused ones included. */
    public long accepted() {
        return accepted.get();
    }

    /** Connections closed at once because {@link #refuseNew(boolean)} was on. */
    public long refused() {
        return refused.get();
    }

    /** Bytes forwarded from clients to the target, over all connections (counted as each chunk is written). */
    public long bytesToTarget() {
        return bytesToTarget.get();
    }

    /** Bytes forwarded from the target to clients, over all connections (counted as each chunk is written). */
    public long bytesToClient() {
        return bytesToClient.get();
    }

    /** Stops forwarding on every live connection, both ways; sockets stay open. */
    public void freeze() {
        update(() -> live.forEach(link -> link.frozen = true));
    }

    /** Stops forwarding on one connection, both ways; its sockets stay open. */
    public void freeze(Link link) {
        update(() -> link.frozen = true);
    }

    /** Forwards again on every live connection, held bytes first; new connections stay held while partitioned. */
    public void thaw() {
        update(() -> live.forEach(link -> link.frozen = false));
    }

    /** Forwards again on one connection, held bytes first. */
    public void thaw(Link link) {
        update(() -> link.frozen = false);
    }

    /** Freezes every live connection and holds new ones (accepted, nothing forwarded) until {@link #heal()}. */
    public void partition() {
        update(() -> {
            partitioned = true;
            live.forEach(link -> link.frozen = true);
        });
    }

    /** Ends a partition: every live connection, held ones included, forwards again. */
    public void heal() {
        update(() -> {
            partitioned = false;
            live.forEach(link -> link.frozen = false);
        });
    }

    /** Delays every forwarded chunk, each direction, by this much; {@link Duration#ZERO} removes the delay. */
    public void latency(Duration latency) {
        if (latency.isNegative()) {
            throw new IllegalArgumentException("latency must not be negative, was " + latency);
        }
        update(() -> latencyNanos = latency.toNanos());
    }

    /** While on, new connections are accepted and reset at once; live ones are untouched. */
    public void refuseNew(boolean refuse) {
        update(() -> refusing = refuse);
    }

    /** Resets every live connection: an RST to the client and to the target. */
    public void reset() {
        connections().forEach(link -> link.close(true));
    }

    /** Resets one connection: an RST to its client and to the target. */
    public void reset(Link link) {
        link.close(true);
    }

    /**
     * Closes every live connection gracefully: a FIN each way (the kernel sends an RST instead
     * where bytes held by a freeze were never read).
     */
    public void closeAll() {
        connections().forEach(link -> link.close(false));
    }

    /**
     * Stops listening, closes every connection and waits for every thread of the proxy to end.
     * Idempotent.
     *
     * @throws IllegalStateException if a thread outlives a generous bound (a leak to fix)
     */
    @Override
    public void close() {
        List<Link> links;
        lock.lock();
        try {
            closed = true;
            links = List.copyOf(live);
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        closeQuietly(server, false);
        links.forEach(link -> link.close(false));
        long deadline = System.nanoTime() + THREAD_EXIT_BOUND.toNanos();
        List<Thread> remaining = threadsLeft();
        while (!remaining.isEmpty() && System.nanoTime() < deadline) {
            try {
                remaining.get(0).join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(name + " was interrupted while closing", e);
            }
            remaining = threadsLeft();
        }
        if (!remaining.isEmpty()) {
            throw new IllegalStateException(name + " threads still running after close: " + remaining);
        }
    }

    @Override
    public String toString() {
        return name + "[" + host() + ":" + port() + " -> " + target.getHostString() + ":" + target.getPort() + "]";
    }

    private List<Thread> threadsLeft() {
        lock.lock();
        try {
            threads.removeIf(thread -> !thread.isAlive());
            return List.copyOf(threads);
        } finally {
            lock.unlock();
        }
    }

    private void update(Runnable change) {
        lock.lock();
        try {
            change.run();
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Starts a daemon thread of this proxy unless it is closed; the thread forgets itself when it ends. */
    private boolean startThread(String threadName, Runnable body) {
        lock.lock();
        try {
            if (closed) {
                return false;
            }
            Thread thread = new Thread(() -> {
                try {
                    body.run();
                } finally {
                    lock.lock();
                    try {
                        threads.remove(Thread.currentThread());
                    } finally {
                        lock.unlock();
                    }
                }
            }, threadName);
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
            return true;
        } finally {
            lock.unlock();
        }
    }

    private void acceptLoop() {
        while (true) {
            Socket client;
            try {
                client = server.accept();
            } catch (IOException e) {
                return; // closed: the only way out of accept
            }
            accepted.incrementAndGet();
            Link link = null;
            lock.lock();
            try {
                if (refusing) {
                    refused.incrementAndGet();
                } else if (!closed) {
                    link = new Link(linkIds.incrementAndGet(), client, partitioned);
                    live.add(link);
                }
            } finally {
                lock.unlock();
            }
            if (link == null) {
                closeQuietly(client, true);
                continue;
            }
            Link started = link;
            if (!startThread(name + "-c" + link.id + "-up", () -> started.run())) {
                link.close(true);
            }
        }
    }

    /**
     * Waits until the link may move a chunk: not frozen, and (with {@code readAt}) the latency
     * since the chunk was read has passed. False when the link is closing.
     */
    private boolean awaitTurn(Link link, long readAt, boolean withLatency) {
        lock.lock();
        try {
            while (true) {
                if (link.closing || closed) {
                    return false;
                }
                if (link.frozen) {
                    changed.await();
                    continue;
                }
                // Read each time: a latency changed meanwhile applies to the chunk already waiting.
                long wait = withLatency ? readAt + latencyNanos - System.nanoTime() : 0;
                if (wait <= 0) {
                    return true;
                }
                changed.awaitNanos(wait);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            lock.unlock();
        }
    }

    private static void closeQuietly(@Nullable AutoCloseable closeable, boolean abort) {
        if (closeable == null) {
            return;
        }
        try {
            if (abort && closeable instanceof Socket socket && !socket.isClosed()) {
                socket.setSoLinger(true, 0);
            }
        } catch (IOException ignored) {
            // Already broken: closing is all that is left.
        }
        try {
            closeable.close();
        } catch (Exception ignored) {
            // Closing is best effort; the socket is unusable either way.
        }
    }

    /** One proxied connection: a client socket, its upstream socket and a pump each way. */
    public final class Link {

        private final int id;
        private final Socket client;
        private final Socket upstream = new Socket();
        private final AtomicLong toTarget = new AtomicLong();
        private final AtomicLong toClient = new AtomicLong();
        private final AtomicInteger pumpsRunning = new AtomicInteger(2);
        // Guarded by the proxy's lock.
        private boolean frozen;
        private volatile boolean closing;

        private Link(int id, Socket client, boolean frozen) {
            this.id = id;
            this.client = client;
            this.frozen = frozen;
        }

        /** Its number in accept order, from 1. */
        public int id() {
            return id;
        }

        /** The client's port on loopback (the proxy's peer). */
        public int clientPort() {
            return client.getPort();
        }

        /** The local port of the socket to the target, or -1 while not yet connected (held by a partition). */
        public int upstreamLocalPort() {
            return upstream.isConnected() ? upstream.getLocalPort() : -1;
        }

        /** Whether the upstream socket was connected (false while held by a partition). */
        public boolean upstreamConnected() {
            return upstream.isConnected();
        }

        /** Bytes forwarded from the client to the target. */
        public long bytesToTarget() {
            return toTarget.get();
        }

        /** Bytes forwarded from the target to the client. */
        public long bytesToClient() {
            return toClient.get();
        }

        public boolean isFrozen() {
            lock.lock();
            try {
                return frozen;
            } finally {
                lock.unlock();
            }
        }

        /** False once the proxy closed or reset it, or both sides finished. */
        public boolean isOpen() {
            return !closing;
        }

        @Override
        public String toString() {
            return name + "-c" + id + "[client " + clientPort() + ", upstream " + upstreamLocalPort()
                    + ", " + toTarget.get() + " B to target, " + toClient.get() + " B to client"
                    + (isFrozen() ? ", frozen" : "") + (closing ? ", closed" : "") + "]";
        }

        /** The up pump's thread: waits out a partition, connects, starts the down pump, pumps up. */
        private void run() {
            if (!awaitTurn(this, 0, false)) {
                finishPump();
                finishPump();
                return;
            }
            try {
                upstream.setTcpNoDelay(true);
                client.setTcpNoDelay(true);
                upstream.connect(target, CONNECT_TIMEOUT_MILLIS);
            } catch (IOException e) {
                close(true); // the target is down: the client sees a reset, as it would without us
                finishPump();
                finishPump();
                return;
            }
            if (!startThread(name + "-c" + id + "-down", () -> pump(upstream, client, toClient, bytesToClient))) {
                close(true);
                finishPump();
            }
            pump(client, upstream, toTarget, bytesToTarget);
        }

        private void pump(Socket from, Socket to, AtomicLong linkCount, AtomicLong proxyCount) {
            byte[] buffer = new byte[CHUNK];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                while (awaitTurn(this, 0, false)) {
                    int read = in.read(buffer);
                    if (read < 0) {
                        // A FIN: pass the half-close on; the other direction may still carry an answer.
                        to.shutdownOutput();
                        return;
                    }
                    if (!awaitTurn(this, System.nanoTime(), true)) {
                        return;
                    }
                    // Counted before the write: whatever a peer has received is already counted.
                    linkCount.addAndGet(read);
                    proxyCount.addAndGet(read);
                    out.write(buffer, 0, read);
                }
            } catch (IOException e) {
                // A reset or a broken pipe on one side: pass it on as a reset of the other
                // (also how a pump learns that the proxy closed the link).
                close(true);
            } finally {
                finishPump();
            }
        }

        private void finishPump() {
            if (pumpsRunning.decrementAndGet() == 0) {
                close(false);
            }
        }

        /** Closes both sockets (with an RST when aborting) and forgets the link; idempotent. */
        private void close(boolean abort) {
            lock.lock();
            try {
                if (closing) {
                    return;
                }
                closing = true;
                live.remove(this);
                changed.signalAll();
            } finally {
                lock.unlock();
            }
            if (!abort) {
                shutdownOutputQuietly(client);
                shutdownOutputQuietly(upstream);
            }
            closeQuietly(client, abort);
            closeQuietly(upstream, abort);
        }

        private void shutdownOutputQuietly(Socket socket) {
            try {
                if (socket.isConnected() && !socket.isClosed() && !socket.isOutputShutdown()) {
                    socket.shutdownOutput();
                }
            } catch (IOException ignored) {
                // The peer is gone already; close follows.
            }
        }
    }

    /** The {@code host:port} part of a URL, found by position so that the rest is kept byte for byte. */
    private record Authority(String url, int start, int end, String host, int port) {

        static Authority of(String url) {
            int scheme = url.indexOf("://");
            if (scheme < 0) {
                throw new IllegalArgumentException("not a URL with a host: " + mask(url));
            }
            int from = scheme + 3;
            int end = url.length();
            for (char c : new char[] {'/', '?', '#'}) {
                int at = url.indexOf(c, from);
                if (at >= 0 && at < end) {
                    end = at;
                }
            }
            // The last '@' ends the user info, so a raw '@' in a password still parses.
            int start = url.lastIndexOf('@', end - 1);
            start = start < from ? from : start + 1;
            String hostPort = url.substring(start, end);
            String host;
            String portText;
            if (hostPort.startsWith("[")) {
                int close = hostPort.indexOf(']');
                if (close < 0) {
                    throw new IllegalArgumentException("unclosed IPv6 host in " + mask(url));
                }
                host = hostPort.substring(1, close);
                portText = hostPort.length() > close + 1 && hostPort.charAt(close + 1) == ':'
                        ? hostPort.substring(close + 2) : "";
            } else {
                int colon = hostPort.lastIndexOf(':');
                host = colon < 0 ? hostPort : hostPort.substring(0, colon);
                portText = colon < 0 ? "" : hostPort.substring(colon + 1);
            }
            if (host.isEmpty() || host.contains(",")) {
                throw new IllegalArgumentException("the URL must name one host: " + mask(url));
            }
            int port;
            try {
                port = portText.isEmpty() ? defaultPort(url.substring(0, scheme)) : Integer.parseInt(portText);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad port in " + mask(url));
            }
            return new Authority(url, start, end, host, port);
        }

        String replaceHostPort(String hostPort) {
            return url.substring(0, start) + hostPort + url.substring(end);
        }

        private static int defaultPort(String scheme) {
            String lower = scheme.toLowerCase(Locale.ROOT);
            if (lower.endsWith("postgresql") || lower.endsWith("postgres")) {
                return 5432;
            }
            if (lower.endsWith("redis") || lower.endsWith("rediss")) {
                return 6379;
            }
            throw new IllegalArgumentException("no port in the URL and no default for scheme " + scheme);
        }

        /** URLs in messages lose their user info: test URLs carry passwords too. */
        private static String mask(String url) {
            int scheme = url.indexOf("://");
            int at = url.lastIndexOf('@');
            return scheme >= 0 && at > scheme ? url.substring(0, scheme + 3) + "****" + url.substring(at) : url;
        }
    }
}
