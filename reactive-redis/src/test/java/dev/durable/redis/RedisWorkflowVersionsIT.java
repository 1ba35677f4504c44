package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.StateMigration;
import dev.durable.WorkflowDefinition;
import dev.durable.redis.testing.RedisExtension;
import dev.durable.redis.testing.TestRedisServer;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/** The pick of an engine with the Redis limiter (lock, then claim) keeps to the versions it can run or migrate. */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisWorkflowVersionsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestRedisServer redis;

    @BeforeEach
    void setUp(TestDatabase database, TestRedisServer server) {
        redis = server;
        engines.on(database);
    }

    record Order(String id, String currency) {
    }

    private static WorkflowDefinition<Order> at(int version) {
        return WorkflowDefinition.builder("rversioned", Order.class).queue("rversions").version(version)
                .step("start", ctx -> Mono.just(Outcome.done("v" + version))).build();
    }

    @Test
    void aRedisLimitedEngineNeitherClaimsNewerVersionsNorVersionsWithNoMigrationPath() {
        long stranded = engines.start(engines.options("rv1"), at(1)).insert(JobRequest.of("rversioned",
                new Order("s", "EUR"))).block(WAIT);
        long migratable = engines.start(engines.options("rv2"), at(2)).insert(JobRequest.of("rversioned",
                new Order("m", "USD"))).block(WAIT);
        long newer = engines.start(engines.options("rv4"), at(4)).insert(JobRequest.of("rversioned",
                new Order("n", "USD"))).block(WAIT);
        WorkflowDefinition<Order> v3 = WorkflowDefinition.builder("rversioned", Order.class).queue("rversions")
                .version(3)
                .step("start", ctx -> Mono.just(Outcome.done("v3:" + ctx.state().currency())))
                .migration(StateMigration.from(2).state(Order.class, old -> new Order(old.id(), old.currency().toLowerCase())))
                .build();
        DurableEngine node = engines.start(engines.options("rv3").limiter(RedisLimiters.redis(redis.uri()))
                .gate("rv-gate", 2)
                .queue(QueueOptions.builder("rversions").pollInterval(Duration.ofMillis(50)).build()), v3);
        assertThat(engines.awaitStatus(node, migratable, InstanceStatus.DONE, WAIT).resultJson()).isEqualTo("\"v3:usd\"");
        Eventually.sleep(1000);
        for (long untouched : List.of(stranded, newer)) {
            Instance waiting = node.get(untouched).block(WAIT);
            assertThat(waiting.status()).isEqualTo(InstanceStatus.RUNNABLE);
            assertThat(waiting.attempt()).isZero();
        }
    }
}
