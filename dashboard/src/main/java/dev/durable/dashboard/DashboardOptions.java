package dev.durable.dashboard;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.springframework.web.reactive.function.server.ServerRequest;
import reactor.core.publisher.Mono;

/**
 * How a dashboard is mounted and what it allows. Immutable; build one with {@link #builder()}.
 *
 * <ul>
 *   <li>{@code basePath}: where the routes live ({@value #DEFAULT_BASE_PATH} by default), without a trailing slash;</li>
 *   <li>{@code readOnly}: hides every action and refuses any POST with 403, whatever the authorizer says;</li>
 *   <li>{@code authorizer}: the application's hook, asked before each page and action (default: permit all,
 *       so mount it behind the application's own access control or give one);</li>
 *   <li>{@code title}: the name in the header and the page titles;</li>
 *   <li>{@code csrfSecret}: the key CSRF tokens are signed with (random per process by default; give the same
 *       one to every node behind a load balancer so a form rendered by one node posts to another);</li>
 *   <li>{@code formFields}: hidden fields every form of a page carries besides the dashboard's own token, for
 *       the application's own filters (the Spring Boot starter adds Spring Security's CSRF token this way);</li>
 *   <li>{@code countsInterval}: how often the shared count refresh of the live feed reads the counts while at
 *       least one viewer is connected (one read for all viewers).</li>
 * </ul>
 */
public final class DashboardOptions {

    public static final String DEFAULT_BASE_PATH = "/durable";
    public static final String DEFAULT_TITLE = "Durable";
    public static final Duration DEFAULT_COUNTS_INTERVAL = Duration.ofSeconds(2);

    private final String basePath;
    private final boolean readOnly;
    private final DashboardAuthorizer authorizer;
    private final String title;
    private final byte[] csrfSecret;
    private final Duration countsInterval;
    private final Function<ServerRequest, Mono<Map<String, String>>> formFields;

    private DashboardOptions(Builder b) {
        this.formFields = b.formFields;
        this.basePath = b.basePath;
        this.readOnly = b.readOnly;
        this.authorizer = b.authorizer;
        this.title = b.title;
        this.csrfSecret = b.csrfSecret != null ? b.csrfSecret.clone() : randomSecret();
        this.countsInterval = b.countsInterval;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The defaults: at {@value #DEFAULT_BASE_PATH}, actions allowed, every request permitted. */
    public static DashboardOptions defaults() {
        return builder().build();
    }

    public String basePath() {
        return basePath;
    }

    public boolean readOnly() {
        return readOnly;
    }

    public DashboardAuthorizer authorizer() {
        return authorizer;
    }

    public String title() {
        return title;
    }

    public byte[] csrfSecret() {
        return csrfSecret.clone();
    }

    public Duration countsInterval() {
        return countsInterval;
    }

    public Function<ServerRequest, Mono<Map<String, String>>> formFields() {
        return formFields;
    }

    @Override
    public String toString() {
        return "DashboardOptions{basePath=" + basePath + ", readOnly=" + readOnly + ", title=" + title
                + ", countsInterval=" + countsInterval + "}";
    }

    private static byte[] randomSecret() {
        byte[] secret = new byte[32];
        new SecureRandom().nextBytes(secret);
        return secret;
    }

    /** Builds options; each setter checks its argument. */
    public static final class Builder {

        private String basePath = DEFAULT_BASE_PATH;
        private boolean readOnly;
        private DashboardAuthorizer authorizer = DashboardAuthorizer.PERMIT_ALL;
        private String title = DEFAULT_TITLE;
        private byte @org.jspecify.annotations.Nullable [] csrfSecret;
        private Duration countsInterval = DEFAULT_COUNTS_INTERVAL;
        private Function<ServerRequest, Mono<Map<String, String>>> formFields = request -> Mono.just(Map.of());

        private Builder() {
        }

        /** Hidden fields (name to value) every form carries, per request: another filter's CSRF token, say. */
        public Builder formFields(Function<ServerRequest, Mono<Map<String, String>>> formFields) {
            this.formFields = Objects.requireNonNull(formFields, "formFields");
            return this;
        }

        /** Where the routes live: "/" or a path such as "/ops/jobs" (no trailing slash, no query). */
        public Builder basePath(String basePath) {
            Objects.requireNonNull(basePath, "basePath");
            if (basePath.equals("/")) {
                basePath = "";
            }
            if (!basePath.isEmpty() && (!basePath.startsWith("/") || basePath.endsWith("/")
                    || !basePath.matches("[A-Za-z0-9/._~-]+"))) {
                throw new IllegalArgumentException("basePath must start with '/', not end with one and hold only"
                        + " letters, digits and / . _ ~ -, was '" + basePath + "'");
            }
            this.basePath = basePath;
            return this;
        }

        public Builder readOnly(boolean readOnly) {
            this.readOnly = readOnly;
            return this;
        }

        public Builder authorizer(DashboardAuthorizer authorizer) {
            this.authorizer = Objects.requireNonNull(authorizer, "authorizer");
            return this;
        }

        public Builder title(String title) {
            if (title == null || title.isBlank()) {
                throw new IllegalArgumentException("title must not be blank");
            }
            this.title = title;
            return this;
        }

        /** At least 16 bytes; the same on every node that serves the dashboard. */
        public Builder csrfSecret(byte[] secret) {
            if (secret == null || secret.length < 16) {
                throw new IllegalArgumentException("csrfSecret must hold at least 16 bytes");
            }
            this.csrfSecret = Arrays.copyOf(secret, secret.length);
            return this;
        }

        public Builder countsInterval(Duration interval) {
            if (interval == null || interval.compareTo(Duration.ofMillis(100)) < 0) {
                throw new IllegalArgumentException("countsInterval must be at least 100 ms, was " + interval);
            }
            this.countsInterval = interval;
            return this;
        }

        public DashboardOptions build() {
            return new DashboardOptions(this);
        }
    }
}
