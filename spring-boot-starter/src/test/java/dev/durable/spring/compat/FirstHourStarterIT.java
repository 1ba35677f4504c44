package dev.durable.spring.compat;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Mono;

/**
 * The starter as a WebFlux team meets it, on whichever Spring Boot line is on the classpath (4 here,
 * 3.5 in {@code spring-boot3-it}): the Spring Boot guide's properties and beans, actuator with Prometheus (the
 * run timer and the run observation's timer both scraped), the health indicator, the transactional
 * recipe (rollback leaves nothing, commit starts the job at once), and the short failure report for
 * a broken URL or an unreachable database.
 */
class FirstHourStarterIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static TestDatabase db;

    @BeforeAll
    static void database() {
        db = TestPostgres.newDatabase("firsthour");
        db.execute("CREATE SCHEMA IF NOT EXISTS \"" + db.schema() + "\"; CREATE TABLE \"" + db.schema()
                + "\".orders (id text PRIMARY KEY)");
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    private static ConfigurableApplicationContext run(String... args) {
        List<String> all = new ArrayList<>(List.of("--server.port=0", "--server.address=127.0.0.1",
                "--durable.schema=" + db.schema(), "--spring.main.banner-mode=off",
                "--management.endpoints.web.exposure.include=health,prometheus",
                "--management.endpoint.health.show-details=always"));
        all.addAll(List.of(args));
        return new SpringApplicationBuilder(FirstHourApp.class).web(WebApplicationType.REACTIVE)
                .run(all.toArray(String[]::new));
    }

    private static String get(ConfigurableApplicationContext context, String path) throws Exception {
        String port = context.getEnvironment().getProperty("local.server.port");
        HttpResponse<String> response = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + port + path)).timeout(WAIT).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).as("GET %s: %s", path, response.body()).isEqualTo(200);
        return response.body();
    }

    /** The Spring Boot guide's properties, as written (the URL is swapped for the test database's). */
    private static Properties readmeProperties() throws IOException {
        Properties properties = new Properties();
        try (InputStream in = FirstHourStarterIT.class.getResourceAsStream("/readme.properties")) {
            properties.load(in);
        }
        return properties;
    }

    @Test
    void theReadmesSetupRunsJobsAndServesHealthAndPrometheus() throws Exception {
        Properties readme = readmeProperties();
        // The guide's URL parses as written: no comment on its line.
        ConnectionFactoryOptions.parse(readme.getProperty("durable.url"));
        readme.setProperty("durable.url", db.url());
        List<String> args = new ArrayList<>();
        readme.forEach((key, value) -> args.add("--" + key + "=" + value));
        try (ConfigurableApplicationContext context = run(args.toArray(String[]::new))) {
            DurableEngine engine = context.getBean(DurableEngine.class);
            assertThat(engine.options().queues()).containsKeys("mail", "outbox");
            assertThat(engine.options().queues().get("mail").concurrency()).isEqualTo(20);

            long id = context.getBean(Signups.class).welcome("ada@example.com").block(WAIT);
            Instance done = engine.awaitSettled(id, WAIT).block();
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(context.getBean(Mailer.class).sent()).containsExactly(new Email("ada@example.com", "Welcome"));

            JsonNode durable = new ObjectMapper().readTree(get(context, "/actuator/health")).path("components")
                    .path("durable");
            assertThat(durable.path("status").asText()).isEqualTo("UP");
            assertThat(durable.path("details").path("schema").asText()).isEqualTo(db.schema());
            assertThat(durable.path("details").path("liveEngines").asInt()).isPositive();
            String scrape = get(context, "/actuator/prometheus");
            assertThat(scrape).contains("durable_run_seconds_count{").contains("durable_step_seconds_count{")
                    .contains("type=\"send-email\"");
            assertThat(FirstHourApp.REFUSED_METERS).as("meters Prometheus refused").isEmpty();
        }
    }

    /**
     * An application served under {@code spring.webflux.base-path}: the dashboard the starter mounts redirects
     * and links under that path, which its routes never see. The page is the overview (200) where Spring
     * Security is absent (Boot 3's module) and the dashboard's 403 where it is present and nobody signed in
     * (Boot 4's): either is framed by the dashboard's own links.
     */
    @Test
    void theDashboardLivesUnderTheApplicationsBasePath() throws Exception {
        try (ConfigurableApplicationContext context = run("--durable.url=" + db.url(), "--spring.webflux.base-path=/app",
                "--durable.dashboard.enabled=true")) {
            String port = context.getEnvironment().getProperty("local.server.port");
            HttpResponse<String> bare = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + port + "/app/durable")).timeout(WAIT).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertThat(bare.statusCode()).isEqualTo(308);
            assertThat(bare.headers().firstValue("Location")).hasValue("/app/durable/");
            HttpResponse<String> page = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + port + "/app/durable/")).timeout(WAIT).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertThat(page.statusCode()).isIn(200, 403);
            assertThat(page.body()).contains(page.statusCode() == 200 ? "id=\"activity\"" : "You may not read this dashboard.")
                    .contains("href=\"/app/durable/instances\"").contains("data-base=\"/app/durable\"")
                    .doesNotContain("href=\"/durable/");
        }
    }

    @Test
    void aPlainInsertInsideTheApplicationsTransactionCommitsOrRollsBackWithIt() {
        // The engine on the application's ConnectionFactory (spring.r2dbc.url); its queue polls a
        // minute apart, so only the poke after the commit can start the job within the wait below.
        String url = db.url() + (db.url().contains("?") ? "&" : "?") + "schema=" + db.schema();
        try (ConfigurableApplicationContext context = run("--spring.r2dbc.url=" + url,
                "--durable.queues.outbox.poll-interval=1m", "--durable.queues.outbox.max-poll-interval=1m")) {
            DurableEngine engine = context.getBean(DurableEngine.class);
            assertThat(engine.options().connectionFactory()).isNotNull();
            Orders orders = context.getBean(Orders.class);
            DatabaseClient database = context.getBean(DatabaseClient.class);
            List<JobEvent> events = new java.util.concurrent.CopyOnWriteArrayList<>();
            engine.events().subscribe(events::add);

            long committed = orders.place("o-1").block(WAIT);
            assertThat(engine.awaitSettled(committed, Duration.ofSeconds(30)).block().status())
                    .isEqualTo(InstanceStatus.DONE);
            long annotated = orders.placeAnnotated("o-2").block(WAIT);
            assertThat(engine.awaitSettled(annotated, Duration.ofSeconds(30)).block().status())
                    .isEqualTo(InstanceStatus.DONE);

            // A transaction that fails after the insert takes the job with it.
            TransactionalOperator transaction = context.getBean(TransactionalOperator.class);
            Long rolledBack = database.sql("INSERT INTO orders (id) VALUES ('o-3')").then()
                    .then(engine.insert(JobRequest.of("ship", "o-3")))
                    .then(Mono.<Long>error(new IllegalStateException("payment declined")))
                    .as(transaction::transactional)
                    .onErrorResume(IllegalStateException.class, declined -> Mono.empty())
                    .block(WAIT);
            assertThat(rolledBack).isNull();
            assertThat(database.sql("SELECT id FROM orders ORDER BY id").map(row -> row.get(0, String.class)).all()
                    .collectList().block(WAIT)).containsExactly("o-1", "o-2");
            assertThat(database.sql("SELECT state FROM \"" + db.schema() + "\".durable_instances_all WHERE type = 'ship'"
                            + " ORDER BY id").map(row -> row.get(0, String.class)).all().collectList().block(WAIT))
                    .containsExactly("\"o-1\"", "\"o-2\"");
            // Its INSERTED was said when the statement ran, inside the transaction that then rolled back.
            assertThat(events).filteredOn(event -> event.kind() == JobEvent.Kind.INSERTED).hasSize(3);
        }
    }

    @Test
    void aUrlWithACommentFailsWithAShortReport() {
        // The README once had "# or spring.r2dbc.*" after the URL: .properties has no such comments.
        String output = failedStart("--durable.url=r2dbc:postgresql://app:secret@localhost:5432/app   # or spring.r2dbc.*");
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Durable's database URL is not usable")
                .contains("no end-of-line comments")
                .doesNotContain("secret@");
    }

    @Test
    void anUnreachableDatabaseFailsWithAShortReport() {
        String output = failedStart("--durable.url=r2dbc:postgresql://app:secret@127.0.0.1:1/app",
                "--durable.startup-timeout=30s");
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Durable engine 'durable' did not start on r2dbc:postgresql://app:****@127.0.0.1:1/app")
                .contains("Check that PostgreSQL is running")
                .doesNotContain("secret@");
    }

    /**
     * What the console showed while the application failed to start. (Boot's OutputCaptureExtension
     * of Boot 4 needs JUnit 6; the console is System.out and System.err, read at each write.)
     */
    private static String failedStart(String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream both = new PrintStream(captured, true, StandardCharsets.UTF_8);
        System.setOut(both);
        System.setErr(both);
        try {
            run(args).close();
            throw new AssertionError("the application started");
        } catch (RuntimeException expected) {
            // reported by Boot on the console, which is what the test reads
        } finally {
            System.setOut(out);
            System.setErr(err);
        }
        String text = captured.toString(StandardCharsets.UTF_8);
        out.print(text);
        return text;
    }

    @Test
    void anOptionOutOfRangeFailsWithAShortReport() {
        String output = failedStart("--durable.url=" + db.url(), "--durable.queues.mail.concurrency=0");
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Durable's configuration is invalid: durable.queues.mail.concurrency: concurrency must be at least 1,"
                        + " was 0");
    }

    @Test
    void aConfigurationThatTakesTheEngineAndDeclaresJobsIsACycle() {
        assertThatThrownBy(() -> new SpringApplicationBuilder(CyclicJobs.class).web(WebApplicationType.NONE)
                .run("--durable.url=" + db.url(), "--durable.schema=" + db.schema(), "--spring.main.banner-mode=off"))
                .hasStackTraceContaining("durableEngine")
                .hasStackTraceContaining("cyclicJobs");
    }

    @Test
    void configurationMetadataDescribesEveryProperty() throws IOException {
        JsonNode metadata;
        try (InputStream in = DurableEngine.class.getClassLoader()
                .getResourceAsStream("META-INF/spring-configuration-metadata.json")) {
            assertThat(in).as("the starter's configuration metadata").isNotNull();
            metadata = new ObjectMapper().readTree(in);
        }
        Map<String, JsonNode> properties = new java.util.HashMap<>();
        metadata.path("properties").forEach(property -> properties.put(property.path("name").asText(), property));
        assertThat(properties).containsKeys("durable.url", "durable.schema", "durable.queues", "durable.poke-transport",
                "durable.startup-timeout", "durable.auto-startup", "durable.health.timeout");
        assertThat(properties.values()).allSatisfy(property ->
                assertThat(property.path("description").asText()).as(property.path("name").asText()).isNotBlank());
        assertThat(properties.get("durable.schema").path("defaultValue").asText()).isEqualTo("durable");
        assertThat(metadata.path("hints").toString()).contains("postgres-notify");
    }

    @Test
    void runsOnTheBootLineUnderTest() {
        String expected = System.getProperty("durable.expectBootMajor", "4");
        assertThat(SpringBootVersion.getVersion()).startsWith(expected + ".");
        // What the Boot line's BOM chose for the libraries the engine runs on (in the test's output).
        System.out.printf("Spring Boot %s: Spring %s, Reactor %s, Micrometer %s, r2dbc-postgresql %s, Jackson %s%n",
                SpringBootVersion.getVersion(), org.springframework.core.SpringVersion.getVersion(),
                version(reactor.core.publisher.Flux.class), version(io.micrometer.core.instrument.MeterRegistry.class),
                version(io.r2dbc.postgresql.PostgresqlConnectionFactory.class),
                version(com.fasterxml.jackson.databind.ObjectMapper.class));
    }

    private static String version(Class<?> type) {
        String version = type.getPackage().getImplementationVersion();
        if (version != null) {
            return version;
        }
        String jar = type.getProtectionDomain().getCodeSource().getLocation().getPath();
        return jar.substring(jar.lastIndexOf('/') + 1);
    }
}
