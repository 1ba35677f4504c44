package dev.durable.example;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.mock.http.server.reactive.MockServerHttpRequest;
import org.springframework.mock.web.server.MockServerWebExchange;
import reactor.core.publisher.Mono;

/** Who gets through {@link LocalAccess}, when the service was told to listen beyond 127.0.0.1. */
class LocalAccessTest {

    private static final InetSocketAddress REMOTE = new InetSocketAddress("203.0.113.7", 50_000);
    private static final InetSocketAddress LOCAL = new InetSocketAddress("127.0.0.1", 50_000);

    private static HttpStatus filter(LocalAccess access, MockServerHttpRequest request) {
        MockServerWebExchange exchange = MockServerWebExchange.from(request);
        AtomicBoolean passed = new AtomicBoolean();
        access.filter(exchange, chained -> {
            passed.set(true);
            return Mono.empty();
        }).block();
        return passed.get() ? HttpStatus.OK : HttpStatus.valueOf(exchange.getResponse().getStatusCode().value());
    }

    @Test
    void remoteClientsGetTheHealthStatusOnlyUnlessAllowed() {
        LocalAccess closed = new LocalAccess(false);
        assertThat(filter(closed, MockServerHttpRequest.get("/api/events").remoteAddress(REMOTE).build()))
                .isEqualTo(HttpStatus.FORBIDDEN);
        assertThat(filter(closed, MockServerHttpRequest.get("/actuator/health/durable").remoteAddress(REMOTE).build()))
                .isEqualTo(HttpStatus.FORBIDDEN);
        assertThat(filter(closed, MockServerHttpRequest.get("/actuator/health").remoteAddress(REMOTE).build()))
                .isEqualTo(HttpStatus.OK);
        assertThat(filter(closed, MockServerHttpRequest.get("/").remoteAddress(REMOTE).build())).isEqualTo(HttpStatus.OK);
        // The dashboard is the API's peer: local clients only.
        assertThat(filter(closed, MockServerHttpRequest.get("/durable/instances").remoteAddress(REMOTE).build()))
                .isEqualTo(HttpStatus.FORBIDDEN);
        assertThat(filter(closed, MockServerHttpRequest.get("/durable/").remoteAddress(LOCAL).build()))
                .isEqualTo(HttpStatus.OK);
        assertThat(filter(closed, MockServerHttpRequest.get("/api/events").remoteAddress(LOCAL).build()))
                .isEqualTo(HttpStatus.OK);
        assertThat(filter(new LocalAccess(true), MockServerHttpRequest.get("/api/events").remoteAddress(REMOTE).build()))
                .isEqualTo(HttpStatus.OK);
    }

    @Test
    void crossSiteStateChangesAreRefusedEvenWhenRemoteIsAllowed() {
        LocalAccess open = new LocalAccess(true);
        assertThat(filter(open, MockServerHttpRequest.post("http://jobs.internal:8080/api/instances/1/retry")
                .header("Origin", "http://evil.example").remoteAddress(REMOTE).build())).isEqualTo(HttpStatus.FORBIDDEN);
        assertThat(filter(open, MockServerHttpRequest.post("http://jobs.internal:8080/api/instances/1/retry")
                .header("Origin", "null").remoteAddress(REMOTE).build())).isEqualTo(HttpStatus.FORBIDDEN);
        assertThat(filter(open, MockServerHttpRequest.post("http://jobs.internal:8080/api/instances/1/retry")
                .header("Origin", "http://jobs.internal:8080").remoteAddress(REMOTE).build())).isEqualTo(HttpStatus.OK);
        assertThat(filter(open, MockServerHttpRequest.get("http://jobs.internal:8080/api/instances/1")
                .header("Origin", "http://evil.example").remoteAddress(REMOTE).build())).isEqualTo(HttpStatus.OK);
    }
}
