package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Eventually;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.Disposable;

/** Nodes joining, leaving and crashing, as another node's {@code members()} sees them. */
@ExtendWith(RedisExtension.class)
class RedisMembershipIT {

    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final Duration TTL = Duration.ofSeconds(3);

    private final List<RedisMembership> memberships = new ArrayList<>();
    private final List<Disposable> subscriptions = new ArrayList<>();

    @AfterEach
    void closeAll() {
        subscriptions.forEach(Disposable::dispose);
        memberships.forEach(m -> m.close().block(WAIT));
    }

    private static RedisMembershipOptions options(String group, String node) {
        return RedisMembershipOptions.builder(group, node).ttl(TTL).heartbeatInterval(Duration.ofMillis(500))
                .pollInterval(Duration.ofMillis(100)).build();
    }

    private RedisMembership join(TestRedisServer redis, String group, String node) {
        RedisMembership membership = RedisMemberships.join(redis.redisUri(), options(group, node)).block(WAIT);
        memberships.add(membership);
        return membership;
    }

    /** The latest set a node has seen. */
    private AtomicReference<Set<String>> watch(RedisMembership membership) {
        AtomicReference<Set<String>> latest = new AtomicReference<>(Set.of());
        subscriptions.add(membership.members().subscribe(latest::set,
                error -> latest.set(Set.of("error: " + error))));
        return latest;
    }

    @Test
    void twoMembersSeeEachOtherAndCloseRemovesANodeAtOnce(TestRedisServer redis) {
        RedisMembership a = join(redis, "close", "a");
        AtomicReference<Set<String>> seenByA = watch(a);
        Eventually.until("a sees itself", WAIT, () -> seenByA.get().equals(Set.of("a")));

        RedisMembership b = join(redis, "close", "b");
        AtomicReference<Set<String>> seenByB = watch(b);
        Eventually.until("a sees both", WAIT, () -> seenByA.get().equals(Set.of("a", "b")));
        Eventually.until("b sees both", WAIT, () -> seenByB.get().equals(Set.of("a", "b")));
        Eventually.sleep(TTL.toMillis() + 500); // heartbeats keep both past their first TTL
        assertThat(seenByA.get()).containsExactlyInAnyOrder("a", "b");

        long closed = System.nanoTime();
        b.close().block(WAIT);
        Eventually.until("a sees b gone", WAIT, () -> seenByA.get().equals(Set.of("a")));
        assertThat(Duration.ofNanos(System.nanoTime() - closed)).as("well before the TTL").isLessThan(TTL);
        assertThat(join(redis, "other-group", "c").members().blockFirst(WAIT)).containsExactly("c");
    }

    @Test
    void aNodeThatStopsHeartbeatingDisappearsWithinItsTtl(TestRedisServer redis) {
        RedisMembership a = join(redis, "crash", "a");
        AtomicReference<Set<String>> seenByA = watch(a);
        // b's client is the test's: shutting it down cuts b off without a deregistration, as a crash would.
        RedisClient bClient = RedisClient.create();
        RedisMembership b = RedisMemberships.join(bClient, redis.redisUri(), options("crash", "b")).block(WAIT);
        Eventually.until("a sees both", WAIT, () -> seenByA.get().equals(Set.of("a", "b")));

        long crashed = System.nanoTime();
        bClient.shutdown(Duration.ZERO, Duration.ofSeconds(5));
        Eventually.until("a sees b gone", WAIT, () -> seenByA.get().equals(Set.of("a")));
        Duration gone = Duration.ofNanos(System.nanoTime() - crashed);
        // Gone by its TTL (plus a poll and slack), and not before its last beat's TTL ran out.
        assertThat(gone).isLessThan(TTL.plusSeconds(2)).isGreaterThan(TTL.minus(Duration.ofMillis(1000)));
        b.close().block(WAIT); // idempotent and quiet after the crash
    }

    @Test
    void joiningWithoutRedisIsATypedError() throws IOException {
        int closedPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            closedPort = socket.getLocalPort();
        }
        assertThatThrownBy(() -> RedisMemberships.join(RedisURI.create("redis://127.0.0.1:" + closedPort),
                        options("nowhere", "a")).block(WAIT))
                .isInstanceOf(RedisUnavailableException.class)
                .hasMessageContaining("membership nowhere of a");
    }
}
