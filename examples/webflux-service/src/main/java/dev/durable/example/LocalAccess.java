package dev.durable.example;

import java.net.InetSocketAddress;
import java.net.URI;
import java.util.Set;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;

/**
 * What the example lets in, with no security library: the service listens on 127.0.0.1, and in
 * case it is told to listen wider ({@code server.address}), the API, the event stream, the dashboard and the
 * actuator (all but the bare health status) answer only loopback clients unless
 * {@code example.allow-remote=true}. State-changing requests (POST and the like) from another site
 * are refused whatever the address: a browser says where a request comes from ({@code Origin},
 * {@code Sec-Fetch-Site}), so a form on another page cannot cancel, retry or signal here. Refusals
 * are problem details, as the API's errors are.
 */
@Component
@Order(Ordered.HIGHEST_PRECEDENCE)
public class LocalAccess implements WebFilter {

    private static final Set<HttpMethod> SAFE = Set.of(HttpMethod.GET, HttpMethod.HEAD, HttpMethod.OPTIONS);
    private static final Set<String> OPEN_PATHS = Set.of("/actuator/health", "/actuator/health/liveness",
            "/actuator/health/readiness");

    private final boolean allowRemote;

    public LocalAccess(@Value("${example.allow-remote:false}") boolean allowRemote) {
        this.allowRemote = allowRemote;
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
        ServerHttpRequest request = exchange.getRequest();
        String path = request.getPath().pathWithinApplication().value();
        if (!allowRemote && guarded(path) && !loopback(request.getRemoteAddress())) {
            return refuse(exchange, "only local clients may use " + path + " (set example.allow-remote=true"
                    + " once something authenticates them)");
        }
        if (!SAFE.contains(request.getMethod()) && crossSite(request)) {
            return refuse(exchange, "cross-site " + request.getMethod() + " refused: this service takes"
                    + " state-changing requests from its own pages and from non-browser clients only");
        }
        return chain.filter(exchange);
    }

    private static boolean guarded(String path) {
        return (path.startsWith("/api/") || path.startsWith("/actuator") || path.startsWith("/durable"))
                && !OPEN_PATHS.contains(path);
    }

    private static boolean loopback(InetSocketAddress remote) {
        return remote != null && remote.getAddress() != null && remote.getAddress().isLoopbackAddress();
    }

    /** A browser's request made by another site: Sec-Fetch-Site says so, or Origin names another host. */
    static boolean crossSite(ServerHttpRequest request) {
        String site = request.getHeaders().getFirst("Sec-Fetch-Site");
        if (site != null && !site.equals("same-origin") && !site.equals("none")) {
            return true;
        }
        String origin = request.getHeaders().getOrigin();
        if (origin == null) {
            return false; // not a browser's cross-origin request (curl, a service, a same-origin GET)
        }
        URI own = request.getURI();
        try {
            URI from = URI.create(origin);
            return !(own.getScheme().equalsIgnoreCase(from.getScheme()) && own.getHost().equalsIgnoreCase(from.getHost())
                    && port(own) == port(from));
        } catch (IllegalArgumentException malformed) {
            return true; // "null" (a sandboxed page) and anything unreadable
        }
    }

    private static int port(URI uri) {
        return uri.getPort() != -1 ? uri.getPort() : "https".equalsIgnoreCase(uri.getScheme()) ? 443 : 80;
    }

    private static Mono<Void> refuse(ServerWebExchange exchange, String detail) {
        var response = exchange.getResponse();
        response.setStatusCode(HttpStatus.FORBIDDEN);
        response.getHeaders().setContentType(MediaType.APPLICATION_PROBLEM_JSON);
        String body = "{\"type\":\"about:blank\",\"title\":\"Forbidden\",\"status\":403,\"detail\":\""
                + detail.replace("\\", "\\\\").replace("\"", "\\\"") + "\"}";
        return response.writeWith(Mono.just(response.bufferFactory().wrap(body.getBytes(
                java.nio.charset.StandardCharsets.UTF_8))));
    }
}
