package dev.durable.redis;

import dev.durable.limit.LimiterFactory;
import dev.durable.limit.LimiterUnderTest;
import dev.durable.redis.testing.TestRedisCluster;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.testing.TestDatabase;
import io.lettuce.core.Range;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The Redis limiter, on one Redis or a Redis Cluster, read in its keys (named as {@code RedisLimiter}
 * names them, under the default key prefix and the test's schema).
 */
final class RedisUnderTest implements LimiterUnderTest {

    /** More shards than any test's gate has: the counters of a key are looked for on each. */
    private static final int SHARDS = 8;

    private final Supplier<LimiterFactory> factory;
    private final Supplier<Peek> peek;
    private final String prefix;

    private RedisUnderTest(Supplier<LimiterFactory> factory, Supplier<Peek> peek, TestDatabase db) {
        this.factory = factory;
        this.peek = peek;
        this.prefix = RedisLimiterOptions.DEFAULT_KEY_PREFIX + ":{" + db.schema();
    }

    /** The limiter on one Redis, with a client of its own per engine. */
    static RedisUnderTest standalone(TestRedisServer redis, TestDatabase db) {
        return new RedisUnderTest(() -> RedisLimiters.redis(redis.uri()), () -> {
            RedisClient client = RedisClient.create(redis.redisUri());
            StatefulRedisConnection<String, String> connection = client.connect();
            return new Peek(connection.sync(), () -> {
                connection.close();
                client.shutdown();
            });
        }, db);
    }

    /** The limiter on a Redis Cluster, through the client the RedisCluster* classes share. */
    static RedisUnderTest cluster(TestRedisCluster cluster, TestDatabase db) {
        return new RedisUnderTest(RedisClusterLimits::limiter, () -> {
            RedisClusterClient client = cluster.client();
            StatefulRedisClusterConnection<String, String> connection = client.connect();
            return new Peek(connection.sync(), () -> {
                connection.close();
                client.shutdown();
            });
        }, db);
    }

    /** A connection to the Redis the limiter uses, to look at its keys; closed by the caller. */
    record Peek(RedisClusterCommands<String, String> sync, Runnable closing) implements AutoCloseable {
        @Override
        public void close() {
            closing.run();
        }
    }

    Peek peek() {
        return peek.get();
    }

    /** The counter of one (gate, key, shard). */
    String gateKey(String gate, String key, int shard) {
        return prefix + ":gate:" + gate + ":" + shard + ":" + key + "}";
    }

    @Override
    public LimiterFactory factory() {
        return factory.get();
    }

    @Override
    public boolean inDatabase() {
        return false;
    }

    /** The members of the key's counters whose slot has not expired by Redis's clock. */
    @Override
    public long heldSlots(String gate, String key) {
        return reading(sync -> {
            List<String> time = sync.time();
            long now = Long.parseLong(time.get(0)) * 1000 + Long.parseLong(time.get(1)) / 1000;
            long held = 0;
            for (int shard = 0; shard < SHARDS; shard++) {
                held += sync.zcount(gateKey(gate, key, shard),
                        Range.from(Range.Boundary.excluding(now), Range.Boundary.unbounded()));
            }
            return held;
        });
    }

    @Override
    public double tokens(String rateLimit, String partition) {
        String tokens = reading(sync -> sync.hget(prefix + ":rate:" + rateLimit + ":" + partition + "}", "tokens"));
        return tokens == null ? Double.NaN : Double.parseDouble(tokens);
    }

    @Override
    public long windowCount(String window, String partition) {
        return reading(sync -> sync.hgetall(prefix + ":window:" + window + ":" + partition + "}").values().stream()
                .mapToLong(Long::parseLong).sum());
    }

    /** Keys whose counters hold a member named as a permit's slot ({@code <engine>:permit:<instance>:<n>#<slot>}). */
    @Override
    public List<String> permitKeys(String gate, List<String> keys) {
        return reading(sync -> {
            List<String> found = new ArrayList<>();
            for (String key : keys.stream().sorted().toList()) {
                for (int shard = 0; shard < SHARDS; shard++) {
                    if (sync.zrange(gateKey(gate, key, shard), 0, -1).stream().anyMatch(m -> m.contains(":permit:"))) {
                        found.add(key);
                        break;
                    }
                }
            }
            return found;
        });
    }

    private <T> T reading(Function<RedisClusterCommands<String, String>, T> read) {
        try (Peek connection = peek()) {
            return read.apply(connection.sync());
        }
    }
}
