package dev.durable.spring;

import dev.durable.Definition;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.QueueOptions;
import dev.durable.RecurringJob;
import dev.durable.observation.TracePropagation;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import io.r2dbc.spi.ConnectionFactory;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

/**
 * Creates a {@link DurableEngine} from the {@code durable.*} properties ({@link DurableProperties} and
 * every engine and queue option, {@link OptionProperties}),
 * registers every {@link Definition} ({@code JobDefinition}, {@code WorkflowDefinition}) and
 * {@link RecurringJob} bean, hands it the application's {@link MeterRegistry} and
 * {@link ObservationRegistry} when there are, starts it with the context and drains it on shutdown
 * ({@link DurableLifecycle}), and adds a {@code durable} health indicator when Boot's health support
 * is present. With a Micrometer Tracing {@code Tracer} and {@code Propagator} (a tracing bridge), the
 * engine stores the trace context of inserts and signals and follows it through runs ({@link DurableTracing}).
 *
 * <p>The database, in order: {@code durable.url} (an own pool, or the
 * {@code durableConnectionFactory} bean made from it when Boot's R2DBC auto-configuration is
 * present: {@link DurableConnectionFactoryAutoConfiguration}); else the application's
 * {@link ConnectionFactory} bean (which the engine uses but does not close), so that inserts join
 * the application's reactive transactions; else a URL made of {@code spring.r2dbc.url},
 * {@code username} and {@code password}.
 *
 * <p>With Spring's R2DBC support ({@code spring-r2dbc}) on the classpath and the engine on a
 * {@code ConnectionFactory} bean, {@code engine.insert(request)} inside a {@code TransactionalOperator}
 * or {@code @Transactional} method joins that transaction ({@link SpringTransactions}).
 *
 * <p>Supports Spring Boot 3.5 and 4: the health indicator comes from Boot 4's health module or,
 * on Boot 3, from {@code durable-spring-boot-starter-boot3}, which the starter brings along.
 *
 * <p>The queues run are those configured under {@code durable.queues} plus, with default knobs,
 * every queue a registered definition or recurring job sends work to.
 */
@AutoConfiguration(afterName = {
        // Their beans are what this configuration picks up when present: Boot 4's names, then Boot 3's.
        "org.springframework.boot.r2dbc.autoconfigure.R2dbcAutoConfiguration",
        "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
        "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
        "org.springframework.boot.micrometer.observation.autoconfigure.ObservationAutoConfiguration",
        "org.springframework.boot.autoconfigure.r2dbc.R2dbcAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.metrics.MetricsAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.observation.ObservationAutoConfiguration"})
@ConditionalOnClass(DurableEngine.class)
@EnableConfigurationProperties(DurableProperties.class)
public class DurableAutoConfiguration {

    /**
     * The engine. Its {@link DurableLifecycle} closes it, after the web server's graceful stop; not
     * Spring's destroy step too ({@code close()} would only find it closed already).
     */
    @Bean(destroyMethod = "")
    @ConditionalOnMissingBean
    public DurableEngine durableEngine(DurableProperties properties, Environment environment,
            ObjectProvider<ConnectionFactory> connectionFactory,
            @Qualifier(DurableConnectionFactoryAutoConfiguration.BEAN) ObjectProvider<ConnectionFactory> ownConnectionFactory,
            ObjectProvider<Definition> definitions,
            ObjectProvider<RecurringJob> recurringJobs, ObjectProvider<MeterRegistry> meterRegistry,
            ObjectProvider<ObservationRegistry> observationRegistry,
            ObjectProvider<TracePropagation> tracePropagation,
            ObjectProvider<DurableEngineCustomizer> customizers) {
        List<Definition> types = definitions.orderedStream().toList();
        List<RecurringJob> schedules = recurringJobs.orderedStream().toList();
        EngineOptions.Builder options = engineOptions(properties, environment, connectionFactory,
                ownConnectionFactory.getIfAvailable(), queuesOf(types, schedules));
        meterRegistry.ifUnique(options::meterRegistry);
        observationRegistry.ifUnique(options::observationRegistry);
        tracePropagation.ifUnique(options::tracePropagation);
        customizers.orderedStream().forEach(customizer -> customizer.customize(options));
        EngineOptions built = options.build();
        DurableEngine.Builder engine = DurableEngine.builder(built);
        types.forEach(engine::register);
        schedules.forEach(engine::schedule);
        if (built.connectionFactory() != null && SpringTransactions.AVAILABLE) {
            engine.joinTransactions(new SpringTransactions());
        }
        return engine.build();
    }

    @Bean
    @ConditionalOnMissingBean
    public DurableLifecycle durableLifecycle(DurableEngine engine, DurableProperties properties,
            Environment environment) {
        String url = engine.options().url() != null ? engine.options().url()
                : hasText(properties.url()) ? properties.url() : environment.getProperty("spring.r2dbc.url");
        return new DurableLifecycle(engine, properties.startupTimeout(), properties.autoStartup(), url);
    }

    /**
     * Options from the properties ({@link OptionProperties}). {@code own} is the pool made from
     * {@code durable.url} for the whole application, when Boot's R2DBC auto-configuration would
     * otherwise have failed without a {@code spring.r2dbc.url}.
     */
    static EngineOptions.Builder engineOptions(DurableProperties properties, Environment environment,
            ObjectProvider<ConnectionFactory> connectionFactory, @Nullable ConnectionFactory own,
            Set<String> implicitQueues) {
        Binder binder = Binder.get(environment);
        EngineOptions.Builder options = OptionProperties.engineOptions(binder);
        connect(options, properties, environment, connectionFactory, own);
        Map<String, QueueOptions> queues = OptionProperties.queues(binder);
        queues.values().forEach(options::queue);
        for (String queue : implicitQueues) {
            if (!queues.containsKey(queue)) {
                options.queue(queue);
            }
        }
        if (queues.isEmpty() && implicitQueues.isEmpty()) {
            options.queue(DurableProperties.DEFAULT_QUEUE);
        }
        return options;
    }

    private static void connect(EngineOptions.Builder options, DurableProperties properties,
            Environment environment, ObjectProvider<ConnectionFactory> connectionFactory,
            @Nullable ConnectionFactory own) {
        if (hasText(properties.url())) {
            if (own != null) {
                options.connectionFactory(own);
            } else {
                options.url(properties.url());
            }
            return;
        }
        // The application's own connection factory first: inserts then join its transactions.
        ConnectionFactory factory = connectionFactory.getIfUnique();
        if (factory != null) {
            options.connectionFactory(factory);
            return;
        }
        String springUrl = environment.getProperty("spring.r2dbc.url");
        if (hasText(springUrl)) {
            options.url(withCredentials(springUrl, environment.getProperty("spring.r2dbc.username"),
                    environment.getProperty("spring.r2dbc.password")));
            return;
        }
        throw new IllegalStateException("Durable needs a PostgreSQL database: set durable.url"
                + " (r2dbc:postgresql://user:password@host:5432/db) or spring.r2dbc.url, or define one"
                + " io.r2dbc.spi.ConnectionFactory bean");
    }

    /**
     * Puts Spring's separate username and password into the URL's user info (percent-encoded,
     * which R2DBC's URL parser decodes), unless the URL carries credentials already.
     */
    static String withCredentials(String url, @Nullable String username, @Nullable String password) {
        int scheme = url.indexOf("://");
        if (!hasText(username) || scheme < 0) {
            return url;
        }
        int authorityStart = scheme + 3;
        int authorityEnd = url.indexOf('/', authorityStart);
        String authority = authorityEnd < 0 ? url.substring(authorityStart) : url.substring(authorityStart, authorityEnd);
        if (authority.contains("@")) {
            return url;
        }
        String userInfo = encode(username) + (password == null || password.isEmpty() ? "" : ":" + encode(password));
        return url.substring(0, authorityStart) + userInfo + "@" + url.substring(authorityStart);
    }

    private static String encode(String value) {
        return URLEncoder.encode(value, StandardCharsets.UTF_8).replace("+", "%20");
    }

    private static Set<String> queuesOf(List<Definition> definitions, List<RecurringJob> recurringJobs) {
        Set<String> queues = new LinkedHashSet<>();
        definitions.forEach(definition -> queues.add(definition.queue()));
        for (RecurringJob job : recurringJobs) {
            if (job.request().queue() != null) {
                queues.add(job.request().queue());
            }
        }
        return queues;
    }

    /** {@code durable.health.timeout}, 5 s unless set. */
    public static Duration healthTimeout(Environment environment) {
        return environment.getProperty("durable.health.timeout", Duration.class, Duration.ofSeconds(5));
    }

    private static boolean hasText(@Nullable String value) {
        return value != null && !value.isBlank();
    }

    /**
     * The {@code durable} health indicator, when the application has Boot's health support. Two
     * levels, because the enablement condition's own class lives in that support: it must not be
     * looked at unless the class condition passed.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.ReactiveHealthIndicator")
    static class Health {

        @Configuration(proxyBeanMethods = false)
        @ConditionalOnEnabledHealthIndicator("durable")
        static class Indicator {

            @Bean
            @ConditionalOnMissingBean(name = "durableHealthIndicator")
            DurableHealthIndicator durableHealthIndicator(DurableEngine engine, DurableLifecycle lifecycle,
                    Environment environment) {
                return new DurableHealthIndicator(engine, lifecycle, healthTimeout(environment));
            }
        }
    }
}
