package dev.durable.example;

import java.time.Duration;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.test.web.reactive.server.WebTestClient;

/**
 * The example application started for real on a random port, as {@code main} starts it. Tests use
 * this rather than {@code @SpringBootTest}: Spring Framework 7's JUnit extension needs JUnit 6,
 * and the build pins JUnit 5.14.
 */
final class RunningExample implements AutoCloseable {

    private final ConfigurableApplicationContext context;
    private final int port;

    private RunningExample(ConfigurableApplicationContext context) {
        this.context = context;
        this.port = ((WebServerApplicationContext) context).getWebServer().getPort();
    }

    /** Starts the application with these extra {@code key=value} properties (on a port of its own). */
    static RunningExample start(String... properties) {
        String[] args = new String[properties.length + 1];
        args[0] = "--server.port=0";
        for (int i = 0; i < properties.length; i++) {
            args[i + 1] = "--" + properties[i];
        }
        return new RunningExample(SpringApplication.run(ExampleApplication.class, args));
    }

    ConfigurableApplicationContext context() {
        return context;
    }

    <T> T bean(Class<T> type) {
        return context.getBean(type);
    }

    String baseUrl() {
        return "http://127.0.0.1:" + port;
    }

    WebTestClient client() {
        return WebTestClient.bindToServer().baseUrl(baseUrl()).responseTimeout(Duration.ofSeconds(30)).build();
    }

    @Override
    public void close() {
        context.close();
    }
}
