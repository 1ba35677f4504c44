package dev.durable.dashboard;

import dev.durable.DurableEngine;
import dev.durable.dashboard.internal.EventHub;
import dev.durable.dashboard.internal.Routes;
import java.util.Objects;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.ServerResponse;

/**
 * The operator's dashboard over one engine, as routes a Spring WebFlux application mounts:
 *
 * <pre>{@code
 * DurableDashboard dashboard = DurableDashboard.create(engine, DashboardOptions.builder()
 *         .basePath("/ops/jobs").authorizer(myHook).build());
 * RouterFunction<ServerResponse> routes = dashboard.routes();   // a @Bean, or RouterFunctions.toHttpHandler(...)
 * }</pre>
 *
 * <p>Pages are rendered on the server and read without JavaScript; one small script keeps counts and the
 * event feed live over Server-Sent Events. All viewers share one subscription to the engine's events and one
 * counts refresh. {@link #close()} ends that subscription (the engine's own close does not need it).
 */
public final class DurableDashboard implements AutoCloseable {

    private final EventHub hub;
    private final RouterFunction<ServerResponse> routes;

    private DurableDashboard(DurableEngine engine, DashboardOptions options) {
        this.hub = new EventHub(engine, options.countsInterval());
        this.routes = new Routes(engine, options, hub).routes();
    }

    /** A dashboard over {@code engine}; its event subscription starts now, so the chart counts from here. */
    public static DurableDashboard create(DurableEngine engine, DashboardOptions options) {
        Objects.requireNonNull(engine, "engine");
        Objects.requireNonNull(options, "options");
        return new DurableDashboard(engine, options);
    }

    /** The routes of a dashboard that lives as long as the application: {@code create(engine, options).routes()}. */
    public static RouterFunction<ServerResponse> routes(DurableEngine engine, DashboardOptions options) {
        return create(engine, options).routes();
    }

    /** Every route under the options' base path. */
    public RouterFunction<ServerResponse> routes() {
        return routes;
    }

    /** Ends the dashboard's subscription to the engine's events; idempotent. */
    @Override
    public void close() {
        hub.dispose();
    }
}
