package dev.durable.redis.testing;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * JUnit 5: gives each test class the shared {@link TestRedisCluster} as a parameter and empties it
 * after the class. The class is skipped only when the redis-server binary cannot start on this
 * machine; a cluster that starts but does not form fails it.
 *
 * <pre>{@code
 * @ExtendWith(RedisClusterExtension.class)
 * class MyClusterIT {
 *     @Test void limits(TestRedisCluster cluster) { ... RedisLimiters.redisCluster(cluster.client(), ...) ... }
 * }
 * }</pre>
 */
public final class RedisClusterExtension implements BeforeAllCallback, AfterAllCallback, ParameterResolver {

    @Override
    public void beforeAll(ExtensionContext context) {
        try {
            TestRedisCluster.cluster();
        } catch (TestRedisCluster.BinaryUnavailableException e) {
            Assumptions.abort(e.getMessage());
        }
    }

    @Override
    public void afterAll(ExtensionContext context) {
        TestRedisCluster.cluster().flushAll();
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == TestRedisCluster.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        return TestRedisCluster.cluster();
    }
}
