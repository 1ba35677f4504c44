package dev.durable.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.PermanentFailureException;
import dev.durable.dashboard.DurableDashboard;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseCookie;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.reactive.EnableWebFluxSecurity;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.core.userdetails.MapReactiveUserDetailsService;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.test.web.reactive.server.EntityExchangeResult;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.util.LinkedMultiValueMap;
import org.springframework.util.MultiValueMap;
import org.springframework.web.reactive.config.EnableWebFlux;
import org.springframework.web.reactive.function.BodyInserters;
import reactor.core.publisher.Mono;

/**
 * The starter mounts the dashboard at /durable when {@code durable.dashboard.enabled=true} (not otherwise),
 * and Spring Security decides through the authorizer: pages for any signed-in user, actions for
 * ROLE_DURABLE_ADMIN; the forms carry Spring Security's CSRF token as well as the dashboard's own.
 */
class DurableDashboardStarterIT {

    private static final Duration WAIT = Duration.ofSeconds(30);
    static final Set<String> BROKEN = ConcurrentHashMap.newKeySet();
    private static TestDatabase db;

    @BeforeAll
    static void database() {
        db = TestPostgres.newDatabase("dashboard_starter");
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableWebFlux
    @EnableWebFluxSecurity
    static class WebAndSecurity {

        // tag::dashboard-security[]
        @Bean
        SecurityWebFilterChain security(ServerHttpSecurity http) {
            // Sign-in as the application has it; the dashboard's own hook then asks for ROLE_DURABLE_ADMIN
            // on actions (durable.dashboard.action-authority), and its forms carry Spring's CSRF token.
            return http.authorizeExchange(exchanges -> exchanges.anyExchange().authenticated())
                    .httpBasic(Customizer.withDefaults())
                    .build();
        }
        // end::dashboard-security[]

        @Bean
        MapReactiveUserDetailsService users() {
            return new MapReactiveUserDetailsService(
                    User.withUsername("viewer").password("{noop}pw").roles("USER").build(),
                    User.withUsername("admin").password("{noop}pw").roles("DURABLE_ADMIN").build());
        }
    }

    private ReactiveWebApplicationContextRunner runner() {
        return new ReactiveWebApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(DurableAutoConfiguration.class,
                        DurableDashboardAutoConfiguration.class))
                .withUserConfiguration(WebAndSecurity.class)
                .withPropertyValues("durable.url=" + db.url(), "durable.schema=" + db.schema(),
                        "durable.queues.default.poll-interval=100ms")
                .withBean("flaky", JobDefinition.class, () -> JobDefinition.of("flaky", String.class,
                        (String arg) -> BROKEN.contains(arg) ? Mono.<String>error(new PermanentFailureException("broken " + arg))
                                : Mono.just("ok " + arg)));
    }

    /** The dashboard.properties of docs/spring-boot.md, as the application would have them. */
    private static String[] readmeProperties() throws java.io.IOException {
        java.util.Properties properties = new java.util.Properties();
        try (var in = DurableDashboardStarterIT.class.getResourceAsStream("/dashboard.properties")) {
            properties.load(in);
        }
        return properties.stringPropertyNames().stream().map(name -> name + "=" + properties.getProperty(name))
                .toArray(String[]::new);
    }

    @Test
    void isNotMountedUnlessEnabled() {
        runner().run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context).doesNotHaveBean(DurableDashboard.class);
        });
    }

    @Test
    void springSecurityDecidesWhoReadsAndWhoActs() throws Exception {
        runner().withPropertyValues(readmeProperties()).run(context -> {
            assertThat(context).hasNotFailed();
            DurableEngine engine = context.getBean(DurableEngine.class);
            BROKEN.add("x");
            long id = engine.insert(JobRequest.of("flaky", "x")).block(WAIT);
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
            BROKEN.remove("x");
            WebTestClient client = WebTestClient.bindToApplicationContext(context).build();

            client.get().uri("/durable/").exchange().expectStatus().isUnauthorized();

            EntityExchangeResult<byte[]> page = client.get().uri("/durable/instances/" + id)
                    .headers(h -> h.setBasicAuth("viewer", "pw")).exchange().expectStatus().isOk()
                    .expectBody().returnResult();
            String html = new String(page.getResponseBodyContent(), StandardCharsets.UTF_8);
            assertThat(html).contains("broken x");
            String ours = page.getResponseCookies().getFirst("durable_dashboard_csrf").getValue();
            ResponseCookie session = page.getResponseCookies().getFirst("SESSION");
            Matcher spring = Pattern.compile("name=\"_csrf\" value=\"([^\"]+)\"").matcher(html);
            assertThat(spring.find()).as("Spring Security's token in the form").isTrue();
            MultiValueMap<String, String> form = new LinkedMultiValueMap<>();
            form.add("_durable_csrf", ours);
            form.add("_csrf", spring.group(1));

            // The viewer passes both CSRF checks and is refused by the authorizer.
            client.post().uri("/durable/instances/" + id + "/retry").headers(h -> h.setBasicAuth("viewer", "pw"))
                    .cookie("durable_dashboard_csrf", ours).cookie("SESSION", session.getValue())
                    .contentType(MediaType.APPLICATION_FORM_URLENCODED).body(BodyInserters.fromFormData(form))
                    .exchange().expectStatus().isForbidden();
            assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);

            // Without Spring Security's token, its own CSRF filter refuses before the dashboard sees it.
            MultiValueMap<String, String> oursOnly = new LinkedMultiValueMap<>();
            oursOnly.add("_durable_csrf", ours);
            client.post().uri("/durable/instances/" + id + "/retry").headers(h -> h.setBasicAuth("admin", "pw"))
                    .cookie("durable_dashboard_csrf", ours).cookie("SESSION", session.getValue())
                    .contentType(MediaType.APPLICATION_FORM_URLENCODED).body(BodyInserters.fromFormData(oursOnly))
                    .exchange().expectStatus().isForbidden();

            // The admin may (the session is the viewer's: the token is the session's, not the user's).
            client.post().uri("/durable/instances/" + id + "/retry").headers(h -> h.setBasicAuth("admin", "pw"))
                    .cookie("durable_dashboard_csrf", ours).cookie("SESSION", session.getValue())
                    .contentType(MediaType.APPLICATION_FORM_URLENCODED).body(BodyInserters.fromFormData(form))
                    .exchange().expectStatus().isSeeOther();
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        });
    }
}
