package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import dev.durable.support.Engines;
import dev.durable.support.PromQl;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.yaml.snakeyaml.Yaml;
import reactor.core.publisher.Mono;

/**
 * The Grafana dashboard and the alert rules under {@code docs/grafana} read only metrics the engine
 * publishes: an engine on a Prometheus registry runs real work (completions, a retry, a failure, a
 * reaped row, a maintenance pass, work nobody serves), its scrape is fetched over HTTP as Prometheus
 * would, and every metric name in every panel's and rule's expression must be in it.
 */
@ExtendWith(PostgresExtension.class)
class GrafanaDashboardIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    /** Meters registered on a tick (unserved work: every sixth registry refresh) get longer. */
    private static final Duration METERS_WAIT = Duration.ofSeconds(120);

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;
    private HttpServer server;

    @BeforeEach
    void setUp(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    @AfterEach
    void stopServer() {
        if (server != null) {
            server.stop(0);
        }
    }

    @Test
    void everyMetricTheDashboardAndTheAlertsReadIsInTheEnginesScrape() throws Exception {
        Path docs = repositoryRoot().resolve("docs/grafana");
        Map<String, Set<String>> wanted = new TreeMap<>(); // metric name -> where it is read
        dashboardMetrics(Files.readString(docs.resolve("durable.json")), wanted);
        alertMetrics(Files.readString(docs.resolve("alerts.yml")), wanted);

        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        URI scrape = serve(registry);
        AtomicInteger flakyCalls = new AtomicInteger();
        DurableEngine engine = engines.start(engines.options("grafana").meterRegistry(registry)
                        .queue(QueueOptions.builder("grafana").pollInterval(Duration.ofMillis(100)).build()),
                JobDefinition.of("ok", String.class, (String s) -> Mono.just(s)).queue("grafana"),
                JobDefinition.of("flaky", String.class, (String s) -> flakyCalls.incrementAndGet() == 1
                                ? Mono.error(new IllegalStateException("first attempt fails")) : Mono.just(s))
                        .queue("grafana").backoff(Backoff.fixed(Duration.ofMillis(10))),
                JobDefinition.of("doomed", String.class, (String s) -> Mono.<String>error(
                        new IllegalStateException("always fails"))).queue("grafana").maxAttempts(1));

        // Completed, retried then completed, failed.
        for (String type : List.of("ok", "flaky", "doomed")) {
            long id = engine.insert(JobRequest.of(type, type)).block(WAIT);
            assertThat(engine.awaitSettled(id, WAIT).block().status()).as(type)
                    .isEqualTo(type.equals("doomed") ? InstanceStatus.FAILED : InstanceStatus.DONE);
        }
        // Work in a queue no engine serves: one row stays due (unserved), one loses its lease and is reaped.
        engine.insert(JobRequest.of("ok", "waits").queue("nobody")).block(WAIT);
        long lost = engine.insert(JobRequest.of("ok", "lost").queue("nobody")).block(WAIT);
        Sql.update(db, "UPDATE {schema}.durable_instances SET status = 'executing', claimed_by = 'dead-worker',"
                + " attempt = 1, lease_expires_at = now() - interval '1 second' WHERE id = $1", lost);
        Maintenance maintenance = engine.maintenance().orElseThrow();
        maintenance.reap().block(WAIT); // the engine's own reaper may have been first: either counts it
        maintenance.collectGarbage().block(WAIT);

        Set<String> published = Set.of();
        Set<String> missing = wanted.keySet();
        long deadline = System.nanoTime() + METERS_WAIT.toNanos();
        while (!missing.isEmpty() && System.nanoTime() < deadline) {
            published = metricNames(get(scrape));
            Set<String> stillMissing = new TreeSet<>(wanted.keySet());
            stillMissing.removeAll(published);
            missing = stillMissing;
            if (!missing.isEmpty()) {
                Thread.sleep(500);
            }
        }
        Map<String, Set<String>> missingWhere = new TreeMap<>(wanted);
        missingWhere.keySet().retainAll(missing);
        assertThat(missingWhere).as("metrics read by docs/grafana but not in the engine's scrape (which has %s)",
                new TreeSet<>(published)).isEmpty();
    }

    /** Adds the metrics every panel (in rows too) and every query variable reads; checks each panel has targets. */
    private static void dashboardMetrics(String json, Map<String, Set<String>> wanted) throws IOException {
        JsonNode dashboard = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
                .readTree(json); // not JSON: fails here
        assertThat(dashboard.path("title").asText()).isNotBlank();
        List<JsonNode> panels = new ArrayList<>();
        for (JsonNode panel : dashboard.path("panels")) {
            if (panel.path("type").asText().equals("row")) {
                panel.path("panels").forEach(panels::add); // a collapsed row holds its panels
            } else {
                panels.add(panel);
            }
        }
        assertThat(panels).as("panels").hasSizeGreaterThan(10);
        for (JsonNode panel : panels) {
            String title = "panel '" + panel.path("title").asText() + "'";
            assertThat(panel.path("targets").size()).as("targets of %s", title).isPositive();
            for (JsonNode target : panel.path("targets")) {
                String expr = target.path("expr").asText();
                assertThat(expr).as("expr of a target of %s", title).isNotBlank();
                assertThat(target.path("datasource").path("uid").asText()).as("datasource of %s", title)
                        .isEqualTo("${datasource}");
                add(wanted, PromQl.metricNames(expr), title, expr);
            }
        }
        List<String> variables = new ArrayList<>();
        for (JsonNode variable : dashboard.path("templating").path("list")) {
            String name = variable.path("name").asText();
            variables.add(name + ":" + variable.path("type").asText());
            if (variable.path("type").asText().equals("query")) {
                String query = variable.path("query").isTextual() ? variable.path("query").asText()
                        : variable.path("query").path("query").asText();
                add(wanted, PromQl.variableMetricNames(query), "variable $" + name, query);
            }
        }
        assertThat(variables).contains("datasource:datasource", "queue:query");
    }

    /** Adds the metrics every rule reads; checks each alert says what it is and what to look at. */
    @SuppressWarnings("unchecked")
    private static void alertMetrics(String yaml, Map<String, Set<String>> wanted) {
        Map<String, Object> file = new Yaml().load(yaml);
        List<Map<String, Object>> groups = (List<Map<String, Object>>) file.get("groups");
        assertThat(groups).as("rule groups").isNotEmpty();
        int rules = 0;
        for (Map<String, Object> group : groups) {
            for (Map<String, Object> rule : (List<Map<String, Object>>) group.get("rules")) {
                String name = "alert " + rule.get("alert");
                Map<String, Object> annotations = (Map<String, Object>) rule.get("annotations");
                assertThat(annotations).as("annotations of %s", name).containsKeys("summary", "description");
                String expr = String.valueOf(rule.get("expr"));
                add(wanted, PromQl.metricNames(expr), name, expr);
                rules++;
            }
        }
        assertThat(rules).as("alert rules").isGreaterThanOrEqualTo(5);
    }

    private static void add(Map<String, Set<String>> wanted, Set<String> names, String where, String expr) {
        assertThat(names).as("metrics read by %s: %s", where, expr).isNotEmpty();
        names.forEach(name -> wanted.computeIfAbsent(name, key -> new TreeSet<>()).add(where));
    }

    /** Serves the registry's scrape on a local port, as an application's /metrics or /actuator/prometheus does. */
    private URI serve(PrometheusMeterRegistry registry) throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/metrics", exchange -> {
            byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/metrics");
    }

    private static String get(URI uri) throws IOException, InterruptedException {
        HttpResponse<String> response = HttpClient.newHttpClient().send(HttpRequest.newBuilder(uri).timeout(WAIT)
                .build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        return response.body();
    }

    /** The names of the samples in a Prometheus text exposition (not of TYPE or HELP lines). */
    static Set<String> metricNames(String exposition) {
        Set<String> names = new TreeSet<>();
        for (String line : exposition.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int end = 0;
            while (end < line.length() && line.charAt(end) != '{' && line.charAt(end) != ' ') {
                end++;
            }
            names.add(line.substring(0, end));
        }
        return names;
    }

    private static Path repositoryRoot() {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !Files.isDirectory(dir.resolve("docs/grafana"))) {
            dir = dir.getParent();
        }
        assertThat(dir).as("the repository root (docs/grafana) above the working directory").isNotNull();
        return dir;
    }
}
