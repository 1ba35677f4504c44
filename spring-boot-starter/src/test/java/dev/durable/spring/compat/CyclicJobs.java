package dev.durable.spring.compat;

import dev.durable.DurableEngine;
import dev.durable.JobDefinition;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import reactor.core.publisher.Mono;

/**
 * What docs/spring-boot.md warns against: a configuration that takes the engine in its constructor and also
 * declares a job. The engine needs every job bean, so it needs this configuration first: a cycle.
 */
@SpringBootConfiguration
@EnableAutoConfiguration
class CyclicJobs {

    private final DurableEngine engine;

    CyclicJobs(DurableEngine engine) {
        this.engine = engine;
    }

    @Bean
    JobDefinition<String, String> echo() {
        return JobDefinition.of("echo", String.class, (String s) -> Mono.just(s + engine.options().name()));
    }
}
