package dev.durable.redis.testing;

import dev.durable.Urls;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import org.jspecify.annotations.Nullable;
import redis.embedded.RedisServer;

/**
 * A real Redis Cluster for tests: the cluster named by {@code DURABLE_REDIS_CLUSTER_URL} (one node's
 * {@code redis://host:port}) when set; otherwise three masters of the embedded redis-server binary,
 * started once per JVM on free ports with {@code cluster-enabled yes}, the 16,384 slots split in
 * three, joined by {@code CLUSTER MEET}, and waited for until every node reports
 * {@code cluster_state:ok}. Blocking by design, like {@link TestRedis}.
 */
public final class TestRedisCluster {

    /** The environment variable naming a node of a cluster to use instead of the embedded one. */
    public static final String URL_ENV = "DURABLE_REDIS_CLUSTER_URL";

    private static final int MASTERS = 3;
    private static final int SLOTS = 16384;
    private static final Duration FORMING = Duration.ofSeconds(60);

    private static @Nullable TestRedisCluster cluster;

    private final List<RedisURI> nodes;
    private final List<RedisServer> embedded;

    private TestRedisCluster(List<RedisURI> nodes, List<RedisServer> embedded) {
        this.nodes = List.copyOf(nodes);
        this.embedded = List.copyOf(embedded);
    }

    /**
     * The shared cluster, started on first use.
     *
     * @throws BinaryUnavailableException when the embedded binary cannot start here (tests skip)
     */
    public static synchronized TestRedisCluster cluster() {
        if (cluster == null) {
            String fromEnv = System.getenv(URL_ENV);
            cluster = fromEnv != null && !fromEnv.isBlank()
                    ? new TestRedisCluster(List.of(RedisURI.create(TestRedis.checkUrl(fromEnv.strip()))), List.of())
                    : startEmbedded();
        }
        return cluster;
    }

    /** The redis-server binary did not start on this machine: a reason to skip, not to fail. */
    public static final class BinaryUnavailableException extends RuntimeException {
        BinaryUnavailableException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The masters this harness started (or the one node given), as seed URIs for a cluster client. */
    public List<RedisURI> nodes() {
        return nodes;
    }

    /** A new cluster client on the seeds; the caller shuts it down. */
    public RedisClusterClient client() {
        return RedisClusterClient.create(nodes);
    }

    /** Whether this is the embedded cluster. */
    public boolean isEmbedded() {
        return !embedded.isEmpty();
    }

    /** Removes every key on every master (between test classes). */
    public void flushAll() {
        forEachMaster((node, commands) -> commands.flushall());
    }

    /** How many keys each master holds, by its {@code host:port}: shows that work spread over the nodes. */
    public Map<String, Long> keysPerMaster() {
        Map<String, Long> keys = new LinkedHashMap<>();
        forEachMaster((node, commands) -> keys.put(node.getUri().getHost() + ":" + node.getUri().getPort(),
                commands.dbsize()));
        return keys;
    }

    private void forEachMaster(BiConsumer<RedisClusterNode, RedisClusterCommands<String, String>> action) {
        RedisClusterClient client = client();
        try (StatefulRedisClusterConnection<String, String> connection = client.connect()) {
            for (RedisClusterNode node : connection.getPartitions()) {
                if (node.is(RedisClusterNode.NodeFlag.UPSTREAM)) {
                    action.accept(node, connection.getConnection(node.getNodeId()).sync());
                }
            }
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(5));
        }
    }

    private static TestRedisCluster startEmbedded() {
        Path dir;
        try {
            dir = Files.createTempDirectory("durable-redis-cluster");
        } catch (IOException e) {
            throw new UncheckedIOException("no temp directory for the embedded cluster's node files", e);
        }
        List<RedisServer> servers = new ArrayList<>();
        List<RedisURI> uris = new ArrayList<>();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> servers.forEach(TestRedisCluster::stopQuietly),
                "embedded-redis-cluster-stop"));
        for (int i = 0; i < MASTERS; i++) {
            int port = freeClusterPort();
            RedisServer server;
            try {
                server = RedisServer.newRedisServer()
                        .port(port)
                        .bind("127.0.0.1")
                        .setting("cluster-enabled yes")
                        .setting("cluster-config-file " + dir.resolve("nodes-" + port + ".conf"))
                        .setting("cluster-node-timeout 5000")
                        .setting("save \"\"")
                        .setting("appendonly no")
                        .soutListener(line -> { })
                        .serrListener(line -> { })
                        .build();
                server.start();
            } catch (IOException | RuntimeException e) {
                servers.forEach(TestRedisCluster::stopQuietly);
                throw new BinaryUnavailableException("the embedded redis-server did not start in cluster mode: " + e, e);
            }
            servers.add(server);
            uris.add(RedisURI.create("127.0.0.1", port));
        }
        form(uris);
        return new TestRedisCluster(uris, servers);
    }

    /** Splits the slots in even ranges, one per master, introduces the nodes and waits for a healthy cluster. */
    private static void form(List<RedisURI> uris) {
        onEachNode(uris, (index, commands) -> {
            int from = SLOTS * index / uris.size();
            int to = SLOTS * (index + 1) / uris.size();
            int[] slots = new int[to - from];
            for (int slot = from; slot < to; slot++) {
                slots[slot - from] = slot;
            }
            return commands.clusterAddSlots(slots);
        });
        onEachNode(uris.subList(0, 1), (index, commands) -> {
            for (RedisURI other : uris.subList(1, uris.size())) {
                commands.clusterMeet(other.getHost(), other.getPort());
            }
            return "OK";
        });
        long deadline = System.nanoTime() + FORMING.toNanos();
        while (true) {
            List<String> states = new ArrayList<>();
            onEachNode(uris, (index, commands) -> {
                String info = commands.clusterInfo();
                states.add(info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:" + uris.size())
                        ? "ok" : info);
                return "OK";
            });
            if (states.stream().allMatch("ok"::equals)) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the embedded Redis Cluster did not form within " + FORMING + ": "
                        + states);
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while the embedded Redis Cluster formed", e);
            }
        }
    }

    private interface NodeCall {
        String apply(int index, RedisCommands<String, String> commands);
    }

    private static void onEachNode(List<RedisURI> uris, NodeCall call) {
        for (int i = 0; i < uris.size(); i++) {
            RedisClient client = RedisClient.create(uris.get(i));
            try (StatefulRedisConnection<String, String> connection = client.connect()) {
                call.apply(i, connection.sync());
            } finally {
                client.shutdown(Duration.ZERO, Duration.ofSeconds(5));
            }
        }
    }

    private static void stopQuietly(RedisServer server) {
        try {
            server.stop();
        } catch (IOException | RuntimeException ignored) {
            // stopping at JVM exit: nothing left to do about it
        }
    }

    /** A free port whose cluster bus port (the port + 10,000) is free and valid too. */
    private static int freeClusterPort() {
        for (int tries = 0; tries < 1000; tries++) {
            try (ServerSocket socket = new ServerSocket(0)) {
                int port = socket.getLocalPort();
                if (port + 10000 > 65535) {
                    continue;
                }
                try (ServerSocket bus = new ServerSocket(port + 10000)) {
                    return port;
                } catch (IOException busTaken) {
                    // try another
                }
            } catch (IOException e) {
                throw new UncheckedIOException("no free port for the embedded cluster", e);
            }
        }
        throw new IllegalStateException("no free port pair (port, port + 10000) for the embedded cluster");
    }

    @Override
    public String toString() {
        return "TestRedisCluster{" + nodes.stream().map(uri -> Urls.masked(uri.toString())).toList()
                + (isEmbedded() ? ", embedded" : "") + "}";
    }
}
