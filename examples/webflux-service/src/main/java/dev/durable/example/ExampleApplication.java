package dev.durable.example;

import dev.durable.dashboard.DashboardAuthorizer;
import java.net.URI;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;

/**
 * The example service. Without {@code durable.url} (or {@code spring.r2dbc.url}) it runs on an
 * embedded PostgreSQL ({@link EmbeddedPostgresDefaults}); the dashboard (module {@code durable-dashboard},
 * mounted by the starter) is at {@code /durable/}, and {@code /} leads there.
 */
@SpringBootApplication
public class ExampleApplication {

    public static void main(String[] args) {
        SpringApplication.run(ExampleApplication.class, args);
    }

    /** Every action allowed: {@link LocalAccess} already keeps the dashboard to local clients. */
    @Bean
    DashboardAuthorizer dashboardAuthorizer() {
        return DashboardAuthorizer.PERMIT_ALL;
    }

    @Bean
    RouterFunction<ServerResponse> home() {
        return RouterFunctions.route().GET("/", request -> ServerResponse.seeOther(URI.create("/durable/")).build())
                .build();
    }
}
