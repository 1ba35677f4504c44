package dev.durable.dashboard;

import org.springframework.web.reactive.function.server.ServerRequest;
import reactor.core.publisher.Mono;

/**
 * The application's say on each dashboard request: asked before every page (with {@link DashboardAction#READ})
 * and every action, it answers true to let it through; false (or an error, or empty) answers 403. The request
 * carries the principal ({@link ServerRequest#principal()}) the application's security filters set, so Spring
 * Security's authentication is what a hook usually reads.
 */
@FunctionalInterface
public interface DashboardAuthorizer {

    /** Lets everything through: for a dashboard behind the application's own access control. */
    DashboardAuthorizer PERMIT_ALL = (request, action) -> Mono.just(true);

    /** Lets pages through and refuses every action. */
    DashboardAuthorizer READ_ONLY = (request, action) -> Mono.just(!action.writes());

    Mono<Boolean> authorize(ServerRequest request, DashboardAction action);
}
