package dev.durable.dashboard;

import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
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
 *   <li>{@code csrfSecret}: the key CSRF tokens are signed with. By default a random secret the engines keep
 *       in the database ({@code DurableAdmin.sharedSecret}), so every replica behind a load balancer accepts a
 *       form another one rendered; give one to keep it out of the database;</li>
 *   <li>{@code formFields}: hidden fields every form of a page carries besides the dashboard's own token, for
 *       the application's own filters (the Spring Boot starter adds Spring Security's CSRF token this way);</li>
 *   <li>{@code countsInterval}: how often the shared refresh of the live feed reads the counts, the due rows
 *       and the last hour's activity while at least one viewer is connected (one read for all viewers; after a
 *       refresh that took long, the next waits nine times as long, so a big backlog's counting costs the
 *       database at most a tenth of a core).</li>
 * </ul>
 */
public final class DashboardOptions {

    public static final String DEFAULT_BASE_PATH = "/durable";
    public static final String DEFAULT_TITLE = "Durable";
    public static final Duration DEFAULT_COUNTS_INTERVAL = Duration.ofSeconds(2);

    private static final OptionList<DashboardOptions> OPTIONS = new OptionList<>("DashboardOptions");

    private static final Option<String> BASE_PATH = OPTIONS.add("basePath", String.class, DEFAULT_BASE_PATH,
            DashboardOptions::checkBasePath, "Where the routes live: \"/\" or a path such as \"/ops/jobs\" (no"
                    + " trailing slash, no query).");
    private static final Option<Boolean> READ_ONLY = OPTIONS.add("readOnly", Boolean.class, false, Checks.notNull(),
            "Hides every action and refuses any POST with 403, whatever the authorizer says.");
    private static final Option<DashboardAuthorizer> AUTHORIZER = OPTIONS.add(Option.of("authorizer",
            DashboardAuthorizer.class, DashboardAuthorizer.PERMIT_ALL, Checks.notNull(),
            "The application's hook, asked before each page and action (default: permit all).")
            .printedAs(authorizer -> null));
    private static final Option<String> TITLE = OPTIONS.add("title", String.class, DEFAULT_TITLE,
            DashboardOptions::checkTitle, "The name in the header and the page titles.");
    private static final Option<byte[]> CSRF_SECRET = OPTIONS.add(Option.of("csrfSecret", byte[].class, null,
            DashboardOptions::checkCsrfSecret, "The key CSRF tokens are signed with: at least 16 bytes, the same on"
                    + " every node (by default a random secret shared through the database).")
            .printedAs(secret -> null));
    private static final Option<Duration> COUNTS_INTERVAL = OPTIONS.add("countsInterval", Duration.class,
            DEFAULT_COUNTS_INTERVAL, DashboardOptions::checkCountsInterval, "How often the shared count refresh of"
                    + " the live feed reads the counts while a viewer is connected; at least 100 ms.");
    private static final Option<Function<ServerRequest, Mono<Map<String, String>>>> FORM_FIELDS = OPTIONS.add(
            Option.<Function<ServerRequest, Mono<Map<String, String>>>>of("formFields", Function.class,
                    request -> Mono.just(Map.of()), Checks.notNull(),
                    "Hidden fields (name to value) every form carries, per request: another filter's CSRF token, say.")
                    .printedAs(fields -> null));

    private final OptionValues values;

    private DashboardOptions(OptionValues values) {
        this.values = values;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The defaults: at {@value #DEFAULT_BASE_PATH}, actions allowed, every request permitted. */
    public static DashboardOptions defaults() {
        return builder().build();
    }

    /** Every option, with its name, type, default, rule and description. */
    public static OptionList<DashboardOptions> options() {
        return OPTIONS;
    }

    public String basePath() {
        return values.get(BASE_PATH);
    }

    public boolean readOnly() {
        return values.get(READ_ONLY);
    }

    public DashboardAuthorizer authorizer() {
        return values.get(AUTHORIZER);
    }

    public String title() {
        return values.get(TITLE);
    }

    /** The secret given, or null: the dashboard then signs with the one the engines share through the database. */
    public byte @Nullable [] csrfSecret() {
        byte[] secret = values.get(CSRF_SECRET);
        return secret == null ? null : secret.clone();
    }

    public Duration countsInterval() {
        return values.get(COUNTS_INTERVAL);
    }

    public Function<ServerRequest, Mono<Map<String, String>>> formFields() {
        return values.get(FORM_FIELDS);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof DashboardOptions that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    /** The options, the secret and the hooks left out. */
    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    /** "/" is the root: the routes then live at "" plus their own paths. */
    private static String checkBasePath(String option, String basePath) {
        Checks.requireNonNull(option, basePath);
        String path = basePath.equals("/") ? "" : basePath;
        if (!path.isEmpty() && (!path.startsWith("/") || path.endsWith("/") || !path.matches("[A-Za-z0-9/._~-]+"))) {
            throw new IllegalArgumentException(option + " must start with '/', not end with one and hold only"
                    + " letters, digits and / . _ ~ -, was '" + path + "'");
        }
        return path;
    }

    private static String checkTitle(String option, String title) {
        if (title == null || title.isBlank()) {
            throw new IllegalArgumentException(option + " must not be blank");
        }
        return title;
    }

    /** A copy, so the caller's array cannot change the secret. */
    private static byte[] checkCsrfSecret(String option, byte[] secret) {
        if (secret == null || secret.length < 16) {
            throw new IllegalArgumentException(option + " must hold at least 16 bytes");
        }
        return Arrays.copyOf(secret, secret.length);
    }

    private static Duration checkCountsInterval(String option, Duration interval) {
        if (interval == null || interval.compareTo(Duration.ofMillis(100)) < 0) {
            throw new IllegalArgumentException(option + " must be at least 100 ms, was " + interval);
        }
        return interval;
    }

    /** Builds options; each setter checks its argument. */
    public static final class Builder {

        private OptionValues values = OptionValues.none();

        private Builder() {
        }

        /** Sets any option of {@link #options()}: the same as the option's own setter. */
        public <T> Builder set(Option<T> option, T value) {
            values = OPTIONS.set(values, option, value);
            return this;
        }

        /** Hidden fields (name to value) every form carries, per request: another filter's CSRF token, say. */
        public Builder formFields(Function<ServerRequest, Mono<Map<String, String>>> formFields) {
            return set(FORM_FIELDS, formFields);
        }

        /** Where the routes live: "/" or a path such as "/ops/jobs" (no trailing slash, no query). */
        public Builder basePath(String basePath) {
            return set(BASE_PATH, basePath);
        }

        public Builder readOnly(boolean readOnly) {
            return set(READ_ONLY, readOnly);
        }

        public Builder authorizer(DashboardAuthorizer authorizer) {
            return set(AUTHORIZER, authorizer);
        }

        public Builder title(String title) {
            return set(TITLE, title);
        }

        /**
         * At least 16 bytes; the same on every node that serves the dashboard. Without one, the dashboard uses
         * a random secret the engines keep in the database, which every replica reads alike.
         */
        public Builder csrfSecret(byte[] secret) {
            return set(CSRF_SECRET, secret);
        }

        public Builder countsInterval(Duration interval) {
            return set(COUNTS_INTERVAL, interval);
        }

        public DashboardOptions build() {
            return new DashboardOptions(values);
        }
    }
}
