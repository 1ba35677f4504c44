package dev.durable.dashboard.internal;

import dev.durable.DurableEngine;
import dev.durable.dashboard.DashboardOptions;
import java.net.URI;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;

/**
 * The dashboard's routes, all registered here: each page asks the authorizer with
 * {@link dev.durable.dashboard.DashboardAction#READ}, reads through the admin API and renders
 * ({@link ReadHandlers}); each action is a POST that must carry the CSRF token, pass the authorizer and, when
 * destructive, a confirmation; then it redirects (303) to what it changed ({@link ActionHandlers}).
 * {@link Guard} holds the checks and the responses both share.
 */
public final class Routes {

    private final DashboardOptions options;
    private final Guard guard;
    private final ReadHandlers reads;
    private final ActionHandlers actions;

    public Routes(DurableEngine engine, DashboardOptions options, EventHub hub) {
        this.options = options;
        this.guard = new Guard(options, engine.admin());
        this.reads = new ReadHandlers(engine, hub, guard);
        this.actions = new ActionHandlers(engine.admin(), guard);
    }

    public RouterFunction<ServerResponse> routes() {
        String b = options.basePath();
        RouterFunctions.Builder routes = RouterFunctions.route();
        if (!b.isEmpty()) {
            routes.GET(b, request -> ServerResponse.permanentRedirect(URI.create(guard.base(request) + "/")).build());
        }
        return routes
                .GET(b + "/", request -> guard.page(request, view -> reads.overview(request, view)))
                .GET(b + "/instances", request -> guard.page(request, view -> reads.instances(request, view)))
                .GET(b + "/instances/{id}", request -> guard.page(request, view -> reads.detail(request, view)))
                .GET(b + "/recurring", request -> guard.page(request, reads::recurring))
                .GET(b + "/limits", request -> guard.page(request, reads::limits))
                .GET(b + "/engines", request -> guard.page(request, reads::engines))
                .GET(b + "/events", reads::events)
                .GET(b + "/static/{file}", reads::asset)
                .POST(b + "/instances/{id}/{action}", actions::instanceAction)
                .POST(b + "/bulk", actions::bulk)
                .GET(b + "/bulk/{id}", request -> guard.page(request, view -> reads.bulkProgress(request, view)))
                .POST(b + "/queues/{queue}/{action}", actions::queueAction)
                .build();
    }
}
