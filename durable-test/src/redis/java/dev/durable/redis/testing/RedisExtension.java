package dev.durable.redis.testing;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * JUnit 5: gives each test class the shared {@link TestRedisServer} as a constructor,
 * lifecycle-method or test parameter. After the class it starts the server again if a test
 * stopped it and empties it, so the next class starts clean.
 *
 * <pre>{@code
 * @ExtendWith(RedisExtension.class)
 * class MyRedisIT {
 *     @Test void pokes(TestRedisServer redis) { ... RedisPokeTransports.redis(redis.uri()) ... }
 * }
 * }</pre>
 */
public final class RedisExtension implements BeforeAllCallback, AfterAllCallback, ParameterResolver {

    @Override
    public void beforeAll(ExtensionContext context) {
        TestRedis.server().start();
    }

    @Override
    public void afterAll(ExtensionContext context) {
        TestRedis.server().flushAll();
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == TestRedisServer.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        return TestRedis.server();
    }
}
