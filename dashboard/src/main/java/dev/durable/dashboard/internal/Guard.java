package dev.durable.dashboard.internal;

import dev.durable.DurableException;
import dev.durable.EngineClosedException;
import dev.durable.InvalidRequestException;
import dev.durable.NoTargetException;
import dev.durable.ReplayRefusedException;
import dev.durable.admin.InstanceStateException;
import dev.durable.dashboard.DashboardAction;
import dev.durable.admin.DurableAdmin;
import dev.durable.dashboard.DashboardOptions;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.springframework.http.CacheControl;
import org.springframework.http.HttpCookie;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseCookie;
import org.springframework.util.MultiValueMap;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * What every route goes through: the authorizer (a write is refused outright in read-only mode), the signed
 * CSRF cookie, the {@link View} a page is rendered with, and the HTML response with its security headers. A
 * page renders only for a reader the authorizer lets in; an action ({@link #act}) runs only with a matching
 * token, the authorizer's yes and, when destructive, a confirmation. Typed errors become error pages.
 */
public final class Guard {

    private static final MediaType HTML = new MediaType("text", "html", StandardCharsets.UTF_8);
    private static final String CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
            + " connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

    /** The name of the secret the engines share for the dashboard's tokens (DurableAdmin.sharedSecret). */
    static final String SHARED_SECRET = "durable.dashboard.csrf";
    /** How long a dashboard that could not read the shared secret signs with its own before it asks again. */
    private static final Duration RETRY_SHARED = Duration.ofMinutes(1);

    private static final Logger log = Loggers.getLogger(Guard.class);

    private final DashboardOptions options;
    /** The signer: of the options' secret, else of the shared one, read once (and again after a failed read). */
    private final Mono<Csrf> csrf;

    Guard(DashboardOptions options, DurableAdmin admin) {
        this.options = options;
        byte[] given = options.csrfSecret();
        if (given != null) {
            this.csrf = Mono.just(new Csrf(given));
        } else {
            Csrf ownFallback = new Csrf(random());
            this.csrf = Mono.defer(() -> admin.sharedSecret(SHARED_SECRET)).map(Csrf::new)
                    .onErrorResume(error -> {
                        log.warn("dashboard: the CSRF secret shared through the database could not be read ({});"
                                + " signing with this process's own for {}: forms another replica served are refused"
                                + " meanwhile", error.toString(), RETRY_SHARED);
                        return Mono.just(ownFallback);
                    })
                    // Long.MAX_VALUE ms is Reactor's "kept for ever".
                    .cache(signer -> signer == ownFallback ? RETRY_SHARED : Duration.ofMillis(Long.MAX_VALUE),
                            error -> Duration.ZERO, () -> Duration.ZERO);
        }
    }

    private static byte[] random() {
        byte[] secret = new byte[32];
        new SecureRandom().nextBytes(secret);
        return secret;
    }

    /**
     * Where the dashboard is mounted as the browser sees it: the application's context path (WebFlux's
     * {@code spring.webflux.base-path}, which the routes never see) and the options' base path.
     */
    String base(ServerRequest request) {
        return request.requestPath().contextPath().value() + options.basePath();
    }

    Mono<Boolean> allowed(ServerRequest request, DashboardAction action) {
        if (action.writes() && options.readOnly()) {
            return Mono.just(false);
        }
        return Mono.defer(() -> options.authorizer().authorize(request, action))
                .defaultIfEmpty(false)
                .onErrorReturn(false);
    }

    @Nullable String cookieToken(ServerRequest request) {
        HttpCookie cookie = request.cookies().getFirst(Csrf.COOKIE);
        return cookie == null ? null : cookie.getValue();
    }

    Mono<View> view(ServerRequest request, String token) {
        String done = request.queryParam("done").orElse(null);
        return Mono.defer(() -> options.formFields().apply(request))
                .defaultIfEmpty(Map.of())
                .map(fields -> new View(base(request), options.title(), token, Map.copyOf(fields),
                        !options.readOnly(), notice(done)));
    }

    /** Fixed texts only: the query parameter picks one, it is never shown itself. */
    private static @Nullable String notice(@Nullable String done) {
        if (done == null) {
            return null;
        }
        return switch (done) {
            case "retried" -> "Retried in place: the instance is runnable again.";
            case "replayed" -> "Replayed: the instance is runnable again at the chosen step.";
            case "forked" -> "Forked: this is the new instance.";
            case "cancelled" -> "Cancelled.";
            case "cancel-requested" -> "Cancel requested: the run stops at its next heartbeat or commit.";
            case "already-settled" -> "Nothing to cancel: the instance had already settled.";
            case "signalled" -> "Signal delivered.";
            case "duplicate" -> "Signal not stored: its dedup key was already used.";
            case "deleted" -> "Deleted.";
            case "run-now" -> "Due now.";
            case "priority" -> "Priority changed.";
            case "paused" -> "Queue paused on every engine.";
            case "resumed" -> "Queue resumed on every engine.";
            default -> null;
        };
    }

    Mono<ServerResponse> page(ServerRequest request, Function<View, Mono<String>> body) {
        return Mono.zip(allowed(request, DashboardAction.READ), csrf).flatMap(both -> {
            boolean ok = both.getT1();
            Csrf signer = both.getT2();
            String cookie = cookieToken(request);
            boolean fresh = !signer.valid(cookie);
            String token = fresh ? signer.mint() : cookie;
            return view(request, token).flatMap(view -> {
                if (!ok) {
                    return html(request, HttpStatus.FORBIDDEN, ActionPages.error(view, 403, "Forbidden",
                            "You may not read this dashboard."), null);
                }
                return Mono.defer(() -> body.apply(view))
                        .flatMap(page -> html(request, HttpStatus.OK, page, fresh ? token : null))
                        .onErrorResume(error -> failure(request, view, error, fresh ? token : null));
            });
        });
    }

    private Mono<ServerResponse> failure(ServerRequest request, View view, Throwable error, @Nullable String newToken) {
        HttpStatus status;
        String title;
        if (error instanceof NotFound || error instanceof NoTargetException) {
            status = HttpStatus.NOT_FOUND;
            title = "Not found";
        } else if (error instanceof InvalidRequestException) {
            status = HttpStatus.BAD_REQUEST;
            title = "Not understood";
        } else if (error instanceof InstanceStateException || error instanceof ReplayRefusedException) {
            status = HttpStatus.CONFLICT;
            title = "Not possible now";
        } else if (error instanceof EngineClosedException) {
            status = HttpStatus.SERVICE_UNAVAILABLE;
            title = "Engine closed";
        } else if (error instanceof DurableException) {
            status = HttpStatus.INTERNAL_SERVER_ERROR;
            title = "Failed";
        } else {
            return Mono.error(error);
        }
        return html(request, status, ActionPages.error(view, status.value(), title, String.valueOf(error.getMessage())),
                newToken);
    }

    Mono<ServerResponse> html(ServerRequest request, HttpStatus status, String page, @Nullable String newToken) {
        ServerResponse.BodyBuilder response = ServerResponse.status(status).contentType(HTML)
                .cacheControl(CacheControl.noStore())
                .header("Content-Security-Policy", CSP)
                .header("X-Content-Type-Options", "nosniff")
                .header("Referrer-Policy", "same-origin")
                .header("X-Frame-Options", "DENY");
        if (newToken != null) {
            response.cookie(ResponseCookie.from(Csrf.COOKIE, newToken).httpOnly(true).sameSite("Strict")
                    .path(base(request).isEmpty() ? "/" : base(request)).build());
        }
        return response.bodyValue(page);
    }

    private Mono<ServerResponse> forbidden(ServerRequest request, String why) {
        String token = cookieToken(request);
        return csrf.flatMap(signer -> view(request, signer.valid(token) ? token : ""))
                .flatMap(view -> html(request, HttpStatus.FORBIDDEN, ActionPages.error(view, 403, "Forbidden", why),
                        null));
    }

    /**
     * An action: refused (403) in read-only mode, without a matching token, or when the authorizer says
     * no; a destructive one without {@code confirm=yes} answers a confirmation page instead.
     */
    Mono<ServerResponse> act(ServerRequest request, DashboardAction action, @Nullable String question,
            Function<MultiValueMap<String, String>, Mono<ServerResponse>> run) {
        if (options.readOnly()) {
            return forbidden(request, "This dashboard is read-only.");
        }
        return Mono.zip(request.formData(), csrf).flatMap(both -> {
            MultiValueMap<String, String> form = both.getT1();
            if (!both.getT2().accepts(cookieToken(request), form.getFirst(Csrf.FIELD))) {
                return forbidden(request, "The form's token is missing or stale: reload the page and try again.");
            }
            return allowed(request, action).flatMap(ok -> {
                if (!ok) {
                    return forbidden(request, "You may not do this here.");
                }
                return view(request, cookieToken(request)).flatMap(view -> {
                    if (question != null && !"yes".equals(form.getFirst("confirm"))) {
                        List<Map.Entry<String, String>> fields = new ArrayList<>();
                        form.forEach((name, values) -> {
                            if (!name.equals(Csrf.FIELD) && !name.equals("confirm")
                                    && !view.formFields().containsKey(name)) {
                                values.forEach(value -> fields.add(Map.entry(name, value)));
                            }
                        });
                        // The full path: the confirmation posts back to where the browser sent this (context path included).
                        return html(request, HttpStatus.OK,
                                ActionPages.confirm(view, question, request.requestPath().value(), fields), null);
                    }
                    return Mono.defer(() -> run.apply(form)).onErrorResume(error -> failure(request, view, error, null));
                });
            });
        });
    }

    /** No such instance: a path id that is no number, or one the admin API does not know. A page answers 404. */
    static final class NotFound extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotFound(String message) {
            super(message, null, false, false);
        }
    }

    static long id(ServerRequest request) {
        try {
            return Long.parseLong(request.pathVariable("id"));
        } catch (NumberFormatException e) {
            throw new NotFound("no instance has id '" + request.pathVariable("id") + "'");
        }
    }
}
