package dev.durable.spring.compat;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.dashboard.DashboardAuthorizer;
import dev.durable.spring.DurableAutoConfiguration;
import dev.durable.spring.DurableDashboardAutoConfiguration;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.reactive.config.EnableWebFlux;
import org.springframework.web.reactive.function.BodyInserters;

/**
 * The dashboard mounted by the starter on whichever Spring Boot line is on the classpath (4 here, 3.5 in
 * {@code spring-boot3-it}, where the module compiled against Spring 7 runs on Spring 6.2): its pages render,
 * its static files are served, a POST without its token is refused.
 */
class DashboardMountIT {

    private static TestDatabase db;

    @BeforeAll
    static void database() {
        db = TestPostgres.newDatabase("dashboard_mount");
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableWebFlux
    static class Web {

        /** Behind the application's own access control (here: none, a test). */
        @Bean
        DashboardAuthorizer dashboardAuthorizer() {
            return DashboardAuthorizer.PERMIT_ALL;
        }
    }

    @Test
    void mountsAtTheConfiguredPath() {
        new ReactiveWebApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(DurableAutoConfiguration.class,
                        DurableDashboardAutoConfiguration.class))
                .withUserConfiguration(Web.class)
                .withPropertyValues("durable.url=" + db.url(), "durable.schema=" + db.schema(),
                        "durable.dashboard.enabled=true", "durable.dashboard.path=/ops", "durable.dashboard.title=Ops")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    WebTestClient client = WebTestClient.bindToApplicationContext(context).build();
                    for (String page : new String[] {"/ops/", "/ops/instances", "/ops/engines", "/ops/recurring",
                            "/ops/limits"}) {
                        String html = new String(client.get().uri(page).exchange().expectStatus().isOk()
                                .expectBody().returnResult().getResponseBodyContent(), StandardCharsets.UTF_8);
                        assertThat(html).as(page).contains("<title>").contains("Ops");
                    }
                    client.get().uri("/ops/static/dashboard.js").exchange().expectStatus().isOk();
                    client.post().uri("/ops/instances/1/retry").contentType(MediaType.APPLICATION_FORM_URLENCODED)
                            .body(BodyInserters.fromFormData("x", "y")).exchange().expectStatus().isForbidden();
                });
    }

    @Configuration(proxyBeanMethods = false)
    @EnableWebFlux
    static class WebWithoutAuthorizer {
    }

    @Configuration(proxyBeanMethods = false)
    @EnableWebFlux
    static class TwoAuthorizers {

        @Bean
        DashboardAuthorizer one() {
            return DashboardAuthorizer.PERMIT_ALL;
        }

        @Bean
        DashboardAuthorizer other() {
            return DashboardAuthorizer.PERMIT_ALL;
        }
    }

    private static ReactiveWebApplicationContextRunner runner(Class<?> web) {
        return new ReactiveWebApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(DurableAutoConfiguration.class,
                        DurableDashboardAutoConfiguration.class))
                .withUserConfiguration(web)
                // No Spring Security: the starter's own hook is not there to decide.
                .withClassLoader(new FilteredClassLoader("org.springframework.security"))
                .withPropertyValues("durable.url=" + db.url(), "durable.schema=" + db.schema(),
                        "durable.dashboard.enabled=true", "durable.dashboard.path=/ops");
    }

    /** With no authorizer and no Spring Security, pages render and a well-formed action is refused. */
    @Test
    void withoutAnAuthorizerTheDashboardOnlyReads() {
        runner(WebWithoutAuthorizer.class).run(context -> {
            assertThat(context).hasNotFailed();
            WebTestClient client = WebTestClient.bindToApplicationContext(context).build();
            var page = client.get().uri("/ops/").exchange().expectStatus().isOk().expectBody().returnResult();
            String token = page.getResponseCookies().getFirst("durable_dashboard_csrf").getValue();
            client.post().uri("/ops/instances/1/retry").cookie("durable_dashboard_csrf", token)
                    .contentType(MediaType.APPLICATION_FORM_URLENCODED)
                    .body(BodyInserters.fromFormData("_durable_csrf", token)).exchange().expectStatus().isForbidden();
        });
    }

    /** Two authorizers are a mistake to report, never a reason to let everyone in. */
    @Test
    void twoAuthorizersFailTheStart() {
        runner(TwoAuthorizers.class).run(context -> assertThat(context).hasFailed());
    }
}
