package dev.durable.spring;

import dev.durable.EngineOptions;
import dev.durable.Urls;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.time.Duration;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotatedTypeMetadata;
import org.springframework.util.ClassUtils;

/**
 * With only {@code durable.url} set, the application's {@link ConnectionFactory}: a pool on that URL,
 * shared by the engine and the application, made before Boot's R2DBC auto-configuration, which
 * would otherwise fail the start-up ("Failed to configure a ConnectionFactory: 'url' attribute is
 * not specified", as on every Boot 3.5 application, whose R2DBC support is always there). Only when
 * that auto-configuration is present, {@code spring.r2dbc.url} is not set and the application
 * defines no connection factory of its own; otherwise the engine keeps an own pool on the URL.
 */
@AutoConfiguration(beforeName = {
        "org.springframework.boot.r2dbc.autoconfigure.R2dbcAutoConfiguration",
        "org.springframework.boot.autoconfigure.r2dbc.R2dbcAutoConfiguration"},
        before = DurableAutoConfiguration.class)
@EnableConfigurationProperties(DurableProperties.class)
@Conditional(DurableConnectionFactoryAutoConfiguration.OnlyDurableUrl.class)
public class DurableConnectionFactoryAutoConfiguration {

    /** The bean's name, which the engine looks for. */
    public static final String BEAN = "durableConnectionFactory";

    @Bean(name = BEAN, destroyMethod = "dispose")
    @ConditionalOnMissingBean(ConnectionFactory.class)
    public ConnectionPool durableConnectionFactory(DurableProperties properties, Environment environment) {
        String url = properties.url();
        ConnectionFactoryOptions parsed;
        try {
            parsed = ConnectionFactoryOptions.parse(url);
        } catch (RuntimeException unusable) {
            throw unusable(url, unusable);
        }
        // Sized and bounded as the engine's own pool would be, by the same durable.* properties.
        EngineOptions engine = OptionProperties.engineOptions(Binder.get(environment)).url(url).build();
        ConnectionFactory target;
        try {
            // As the engine's own pool would be: the server cuts a statement that runs past the bound.
            target = ConnectionFactories.get(parsed.mutate()
                    .option(ConnectionFactoryOptions.STATEMENT_TIMEOUT, engine.statementTimeout()).build());
        } catch (RuntimeException unusable) {
            throw unusable(url, unusable);
        }
        Duration acquire = engine.acquireTimeout();
        return new ConnectionPool(ConnectionPoolConfiguration.builder(target)
                .name("durable")
                .initialSize(1)
                .maxSize(engine.poolMaxSize())
                .maxIdleTime(Duration.ofMinutes(5))
                .maxAcquireTime(acquire)
                .maxCreateConnectionTime(acquire)
                .maxValidationTime(acquire)
                .build());
    }

    private static IllegalArgumentException unusable(String url, RuntimeException unusable) {
        return new IllegalArgumentException("url is not a usable R2DBC URL: " + Urls.maskedIn(unusable.getMessage(), url));
    }

    /** durable.url set, spring.r2dbc.url not, and Boot's R2DBC auto-configuration (3 or 4) present. */
    static final class OnlyDurableUrl extends SpringBootCondition {

        @Override
        public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
            if (!context.getEnvironment().containsProperty("durable.url")) {
                return ConditionOutcome.noMatch("durable.url is not set");
            }
            if (context.getEnvironment().containsProperty("spring.r2dbc.url")) {
                return ConditionOutcome.noMatch("spring.r2dbc.url is set: Boot makes the connection factory");
            }
            ClassLoader loader = context.getClassLoader();
            if (ClassUtils.isPresent("org.springframework.boot.r2dbc.autoconfigure.R2dbcAutoConfiguration", loader)
                    || ClassUtils.isPresent("org.springframework.boot.autoconfigure.r2dbc.R2dbcAutoConfiguration",
                            loader)) {
                return ConditionOutcome.match("durable.url alone, with Boot's R2DBC auto-configuration present");
            }
            return ConditionOutcome.noMatch("Boot's R2DBC auto-configuration is not present");
        }
    }
}
