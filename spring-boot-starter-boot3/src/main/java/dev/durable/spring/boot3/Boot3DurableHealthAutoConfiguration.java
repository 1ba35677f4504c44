package dev.durable.spring.boot3;

import dev.durable.DurableEngine;
import java.time.Duration;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

/**
 * The {@code durable} health indicator on Spring Boot 3 (health API in
 * {@code org.springframework.boot.actuate.health}). Two levels, because the enablement condition's
 * own class lives in Boot 3's actuator: it must not be looked at unless the class condition passed.
 * On Boot 4 the outer condition fails and nothing here loads.
 */
@AutoConfiguration(afterName = "dev.durable.spring.DurableAutoConfiguration")
@ConditionalOnClass(name = {"org.springframework.boot.actuate.health.ReactiveHealthIndicator",
        "org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator"})
public class Boot3DurableHealthAutoConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnEnabledHealthIndicator("durable")
    @ConditionalOnBean(DurableEngine.class)
    static class Indicator {

        @Bean
        @ConditionalOnMissingBean(name = "durableHealthIndicator")
        Boot3DurableHealthIndicator durableHealthIndicator(DurableEngine engine, Environment environment) {
            return new Boot3DurableHealthIndicator(engine, environment.getProperty("durable.health.timeout",
                    Duration.class, Duration.ofSeconds(5)));
        }
    }
}
