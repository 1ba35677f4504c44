package dev.durable.spring;

import dev.durable.DurableEngine;
import dev.durable.dashboard.DashboardAuthorizer;
import dev.durable.dashboard.DashboardOptions;
import dev.durable.dashboard.DurableDashboard;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.security.authentication.AnonymousAuthenticationToken;
import org.springframework.security.core.Authentication;
import org.springframework.security.web.server.csrf.CsrfToken;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/**
 * Mounts the operator's dashboard ({@code durable-dashboard} on the classpath) at {@code durable.dashboard.path}
 * when {@code durable.dashboard.enabled=true}, in a reactive web application.
 *
 * <p>Who may do what is a {@link DashboardAuthorizer}: the application's own bean when it has one; else, with
 * Spring Security, one that reads the request's {@link Authentication} (pages for any authenticated user or
 * those with {@code read-authority}, actions for {@code action-authority}), and the dashboard's forms carry
 * Spring Security's CSRF token too, so its CSRF filter lets them through; else the dashboard is read-only (pages
 * for every request that reaches it, no action) until the application declares an authorizer. Two authorizer
 * beans are an error, never a silent fallback.
 */
@AutoConfiguration(after = DurableAutoConfiguration.class)
@ConditionalOnClass({DurableDashboard.class, RouterFunction.class})
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
@ConditionalOnProperty(prefix = "durable.dashboard", name = "enabled", havingValue = "true")
@EnableConfigurationProperties(DurableDashboardProperties.class)
public class DurableDashboardAutoConfiguration {

    private static final reactor.util.Logger log = reactor.util.Loggers.getLogger(DurableDashboardAutoConfiguration.class);
    /** Without an authorizer: pages for whoever reaches them, no action. */
    private static final DashboardAuthorizer READS_ONLY = (request, action) -> Mono.just(!action.writes());

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public DurableDashboard durableDashboard(DurableEngine engine, DurableDashboardProperties properties,
            ObjectProvider<DashboardAuthorizer> authorizer, ObjectProvider<DashboardFormFields> formFields) {
        DashboardOptions.Builder options = DashboardOptions.builder()
                .basePath(properties.path())
                .readOnly(properties.readOnly())
                .title(properties.title())
                // getIfAvailable, not getIfUnique: two authorizers fail the start instead of opening the dashboard.
                .authorizer(authorizer.getIfAvailable(() -> {
                    log.warn("durable.dashboard: no DashboardAuthorizer bean and no Spring Security: the dashboard at {}"
                            + " is read-only; declare a DashboardAuthorizer to allow its actions", properties.path());
                    return READS_ONLY;
                }));
        if (properties.csrfSecret() != null) {
            options.csrfSecret(properties.csrfSecret().getBytes(StandardCharsets.UTF_8));
        }
        formFields.ifUnique(fields -> options.formFields(fields::of));
        return DurableDashboard.create(engine, options.build());
    }

    @Bean
    public RouterFunction<ServerResponse> durableDashboardRoutes(DurableDashboard dashboard) {
        return dashboard.routes();
    }

    /** The hidden fields the starter adds to the dashboard's forms (Spring Security's CSRF token). */
    @FunctionalInterface
    public interface DashboardFormFields {
        Mono<Map<String, String>> of(ServerRequest request);
    }

    /** With Spring Security: its authentication decides, and its CSRF token rides along in each form. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = {"org.springframework.security.core.Authentication",
            "org.springframework.security.web.server.csrf.CsrfToken"})
    static class SpringSecurity {

        @Bean
        @ConditionalOnMissingBean
        DashboardAuthorizer durableDashboardAuthorizer(DurableDashboardProperties properties) {
            return (request, action) -> request.principal()
                    .filter(Authentication.class::isInstance)
                    .cast(Authentication.class)
                    .filter(authentication -> authentication.isAuthenticated()
                            && !(authentication instanceof AnonymousAuthenticationToken))
                    .map(authentication -> {
                        String needed = action.writes() ? properties.actionAuthority() : properties.readAuthority();
                        return needed == null || authentication.getAuthorities().stream()
                                .anyMatch(granted -> needed.equals(granted.getAuthority()));
                    })
                    .defaultIfEmpty(false);
        }

        @Bean
        @ConditionalOnMissingBean
        DashboardFormFields durableDashboardSecurityCsrf() {
            return request -> {
                Object attribute = request.exchange().getAttributes().get(CsrfToken.class.getName());
                if (attribute instanceof Mono<?> token) {
                    return token.filter(CsrfToken.class::isInstance).cast(CsrfToken.class)
                            .map(csrf -> Map.of(csrf.getParameterName(), csrf.getToken()))
                            .defaultIfEmpty(Map.of());
                }
                return Mono.just(Map.of());
            };
        }
    }
}
