package dev.durable.example;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The example service. Without {@code durable.url} (or {@code spring.r2dbc.url}) it runs on an
 * embedded PostgreSQL ({@link EmbeddedPostgresDefaults}); the dashboard is at {@code /}.
 */
@SpringBootApplication
public class ExampleApplication {

    public static void main(String[] args) {
        SpringApplication.run(ExampleApplication.class, args);
    }
}
