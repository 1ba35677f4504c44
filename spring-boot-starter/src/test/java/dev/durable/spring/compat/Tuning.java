package dev.durable.spring.compat;

import dev.durable.spring.DurableEngineCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

@Configuration(proxyBeanMethods = false)
class Tuning {

    // tag::spring-customizer[]
    @Bean
    DurableEngineCustomizer durableLimits() {
        return options -> options
                .gate("partner-api", 8)          // what durable.* properties cannot say
                .rateLimit("smtp", 50, 100);
    }
    // end::spring-customizer[]
}
