package dev.durable.example;

import dev.durable.testing.TestPostgres;
import java.util.Map;
import org.springframework.boot.EnvironmentPostProcessor;
import org.springframework.boot.SpringApplication;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.MapPropertySource;

/**
 * Gives the example a database when none is configured: {@code durable.url} becomes the embedded
 * PostgreSQL of {@link TestPostgres} (or the server named by {@code DURABLE_PG_URL}). Added last,
 * so any configured URL wins. This is the example's convenience, not the starter's: a real
 * application names its database.
 */
public class EmbeddedPostgresDefaults implements EnvironmentPostProcessor {

    @Override
    public void postProcessEnvironment(ConfigurableEnvironment environment, SpringApplication application) {
        if (environment.containsProperty("durable.url") || environment.containsProperty("spring.r2dbc.url")) {
            return;
        }
        // Runs once on the main thread while the application starts: starting the server blocks.
        environment.getPropertySources().addLast(new MapPropertySource("durable-example-embedded-postgres",
                Map.of("durable.url", TestPostgres.url())));
    }
}
