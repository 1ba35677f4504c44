package dev.durable.dashboard.internal;

import dev.durable.DurableEngine;
import dev.durable.DurableException;
import dev.durable.EngineClosedException;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobEvent;
import dev.durable.LiveEngine;
import dev.durable.NoTargetException;
import dev.durable.ReplayRefusedException;
import dev.durable.QueueStats;
import dev.durable.RecurringJob;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.InstanceStateException;
import dev.durable.admin.PageRequest;
import dev.durable.admin.StatusCount;
import dev.durable.dashboard.DashboardAction;
import dev.durable.dashboard.DashboardOptions;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.springframework.http.CacheControl;
import org.springframework.http.HttpCookie;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseCookie;
import org.springframework.util.MultiValueMap;
import org.springframework.web.reactive.function.BodyInserters;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The dashboard's routes: each page asks the authorizer with {@link DashboardAction#READ}, reads through the
 * admin API and renders; each action is a POST that must carry the CSRF token, pass the authorizer and, when
 * destructive, a confirmation; then it redirects (303) to what it changed.
 */
public final class Handlers {

    private static final MediaType HTML = new MediaType("text", "html", StandardCharsets.UTF_8);
    private static final String CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
            + " connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";
    private static final int TREE_CHILDREN = 20;
    private static final int TREE_GRANDCHILDREN = 10;

    private final DurableEngine engine;
    private final DurableAdmin admin;
    private final DashboardOptions options;
    private final EventHub hub;
    private final Csrf csrf;
    private final Map<String, byte[]> assets;

    public Handlers(DurableEngine engine, DashboardOptions options, EventHub hub) {
        this.engine = engine;
        this.admin = engine.admin();
        this.options = options;
        this.hub = hub;
        this.csrf = new Csrf(options.csrfSecret());
        this.assets = Map.of("dashboard.css", asset("dashboard.css"), "dashboard.js", asset("dashboard.js"));
    }

    private static byte[] asset(String name) {
        try (InputStream in = Handlers.class.getResourceAsStream("/dev/durable/dashboard/static/" + name)) {
            if (in == null) {
                throw new IllegalStateException("the dashboard's " + name + " is missing from its jar");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public RouterFunction<ServerResponse> routes() {
        String b = options.basePath();
        RouterFunctions.Builder routes = RouterFunctions.route();
        if (!b.isEmpty()) {
            routes.GET(b, request -> ServerResponse.permanentRedirect(URI.create(b + "/")).build());
        }
        return routes
                .GET(b + "/", request -> page(request, this::overview))
                .GET(b + "/instances", request -> page(request, view -> instances(request, view)))
                .GET(b + "/instances/{id}", request -> page(request, view -> detail(request, view)))
                .GET(b + "/recurring", request -> page(request, this::recurring))
                .GET(b + "/limits", request -> page(request, this::limits))
                .GET(b + "/engines", request -> page(request, this::engines))
                .GET(b + "/events", this::events)
                .GET(b + "/static/{file}", this::asset)
                .POST(b + "/instances/{id}/{action}", this::instanceAction)
                .POST(b + "/bulk", this::bulk)
                .GET(b + "/bulk/{id}", request -> page(request, view -> bulkProgress(request, view)))
                .POST(b + "/queues/{queue}/{action}", this::queueAction)
                .build();
    }

    // ---- Plumbing: authorization, CSRF cookie, errors ---------------------------------------------

    private Mono<Boolean> allowed(ServerRequest request, DashboardAction action) {
        if (action.writes() && options.readOnly()) {
            return Mono.just(false);
        }
        return Mono.defer(() -> options.authorizer().authorize(request, action))
                .defaultIfEmpty(false)
                .onErrorReturn(false);
    }

    private @Nullable String cookieToken(ServerRequest request) {
        HttpCookie cookie = request.cookies().getFirst(Csrf.COOKIE);
        return cookie == null ? null : cookie.getValue();
    }

    private Mono<View> view(ServerRequest request, String token) {
        String done = request.queryParam("done").orElse(null);
        return Mono.defer(() -> options.formFields().apply(request))
                .defaultIfEmpty(Map.of())
                .map(fields -> new View(options.basePath(), options.title(), token, Map.copyOf(fields),
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

    private Mono<ServerResponse> page(ServerRequest request, Function<View, Mono<String>> body) {
        return allowed(request, DashboardAction.READ).flatMap(ok -> {
            String cookie = cookieToken(request);
            boolean fresh = !csrf.valid(cookie);
            String token = fresh ? csrf.mint() : cookie;
            return view(request, token).flatMap(view -> {
                if (!ok) {
                    return html(HttpStatus.FORBIDDEN, ActionPages.error(view, 403, "Forbidden",
                            "You may not read this dashboard."), null);
                }
                return Mono.defer(() -> body.apply(view))
                        .flatMap(page -> html(HttpStatus.OK, page, fresh ? token : null))
                        .onErrorResume(error -> failure(view, error, fresh ? token : null));
            });
        });
    }

    private Mono<ServerResponse> failure(View view, Throwable error, @Nullable String newToken) {
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
        return html(status, ActionPages.error(view, status.value(), title, String.valueOf(error.getMessage())), newToken);
    }

    private Mono<ServerResponse> html(HttpStatus status, String page, @Nullable String newToken) {
        ServerResponse.BodyBuilder response = ServerResponse.status(status).contentType(HTML)
                .cacheControl(CacheControl.noStore())
                .header("Content-Security-Policy", CSP)
                .header("X-Content-Type-Options", "nosniff")
                .header("Referrer-Policy", "same-origin")
                .header("X-Frame-Options", "DENY");
        if (newToken != null) {
            response.cookie(ResponseCookie.from(Csrf.COOKIE, newToken).httpOnly(true).sameSite("Strict")
                    .path(options.basePath().isEmpty() ? "/" : options.basePath()).build());
        }
        return response.bodyValue(page);
    }

    private Mono<ServerResponse> forbidden(ServerRequest request, String why) {
        String token = cookieToken(request);
        return view(request, csrf.valid(token) ? token : "")
                .flatMap(view -> html(HttpStatus.FORBIDDEN, ActionPages.error(view, 403, "Forbidden", why), null));
    }

    /**
     * An action: refused (403) in read-only mode, without a matching token, or when the authorizer says
     * no; a destructive one without {@code confirm=yes} answers a confirmation page instead.
     */
    private Mono<ServerResponse> act(ServerRequest request, DashboardAction action, @Nullable String question,
            Function<MultiValueMap<String, String>, Mono<ServerResponse>> run) {
        if (options.readOnly()) {
            return forbidden(request, "This dashboard is read-only.");
        }
        return request.formData().flatMap(form -> {
            if (!csrf.accepts(cookieToken(request), form.getFirst(Csrf.FIELD))) {
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
                        return html(HttpStatus.OK, ActionPages.confirm(view, question, request.path(), fields), null);
                    }
                    return Mono.defer(() -> run.apply(form)).onErrorResume(error -> failure(view, error, null));
                });
            });
        });
    }

    private Mono<ServerResponse> seeOther(String path) {
        return ServerResponse.seeOther(URI.create(path)).build();
    }

    private static final class NotFound extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotFound(String message) {
            super(message, null, false, false);
        }
    }

    private static long id(ServerRequest request) {
        try {
            return Long.parseLong(request.pathVariable("id"));
        } catch (NumberFormatException e) {
            throw new NotFound("no instance has id '" + request.pathVariable("id") + "'");
        }
    }

    // ---- Pages ------------------------------------------------------------------------------------

    private Mono<String> overview(View view) {
        return Mono.zip(admin.counts(), engine.liveEngines().collectList(), admin.pausedQueues()).map(both -> {
            Map<String, dev.durable.admin.QueuePause> paused = new TreeMap<>();
            both.getT3().forEach(pause -> paused.put(pause.queue(), pause));
            Map<String, Map<InstanceStatus, StatusCount>> counts = new TreeMap<>();
            for (StatusCount count : both.getT1()) {
                counts.computeIfAbsent(count.queue(), q -> new EnumMap<>(InstanceStatus.class)).put(count.status(), count);
            }
            Map<String, List<String>> servedBy = new TreeMap<>();
            for (LiveEngine live : both.getT2()) {
                live.queues().forEach(q -> servedBy.computeIfAbsent(q, x -> new ArrayList<>()).add(live.name()));
            }
            Map<String, QueueStats> here = new TreeMap<>();
            engine.queueStats().forEach(stats -> here.put(stats.queue(), stats));
            Set<String> queues = new TreeSet<>(counts.keySet());
            queues.addAll(servedBy.keySet());
            queues.addAll(engine.options().queues().keySet());
            queues.addAll(paused.keySet());
            List<OverviewPage.QueueRow> rows = new ArrayList<>();
            for (String queue : queues) {
                // A copy: a queue no live engine serves gets the immutable empty list, which refuses sort.
                List<String> engines = new ArrayList<>(servedBy.getOrDefault(queue, List.of()));
                Collections.sort(engines);
                rows.add(new OverviewPage.QueueRow(queue, counts.getOrDefault(queue, Map.of()), here.get(queue), engines,
                        paused.containsKey(queue)));
            }
            List<JobEvent> recent = hub.recentEvents();
            return OverviewPage.overview(view, rows, true, hub.chart(), recent);
        });
    }

    private Mono<String> instances(ServerRequest request, View view) {
        FilterForm form = FilterForm.of(request.queryParams());
        InstanceFilter filter = form.filter();
        boolean newestFirst = !"oldest".equals(request.queryParam("order").orElse("newest"));
        int size = request.queryParam("size").map(Handlers::size).orElse(50);
        PageRequest.Order order = newestFirst ? PageRequest.Order.NEWEST_FIRST : PageRequest.Order.OLDEST_FIRST;
        PageRequest.Order reverse = newestFirst ? PageRequest.Order.OLDEST_FIRST : PageRequest.Order.NEWEST_FIRST;
        String before = request.queryParam("before").orElse(null);
        String after = request.queryParam("after").orElse(null);
        Mono<InstanceListPage.Listing> listing;
        if (before != null) {
            // The page before: read backwards from its first row, then turn it round.
            listing = admin.list(filter, new PageRequest(reverse, size, before)).map(page -> {
                List<Instance> items = new ArrayList<>(page.items());
                Collections.reverse(items);
                String previous = page.hasNext() && !items.isEmpty() ? PageRequest.cursorFor(items.get(0).id()) : null;
                String next = items.isEmpty() ? null : PageRequest.cursorFor(items.get(items.size() - 1).id());
                return new InstanceListPage.Listing(items, newestFirst, size, previous, next);
            });
        } else {
            listing = admin.list(filter, new PageRequest(order, size, after)).map(page -> {
                String previous = after != null && !page.items().isEmpty()
                        ? PageRequest.cursorFor(page.items().get(0).id()) : null;
                return new InstanceListPage.Listing(page.items(), newestFirst, size, previous, page.next());
            });
        }
        return listing.map(page -> InstanceListPage.instances(view, form, page));
    }

    private static int size(String value) {
        try {
            int size = Integer.parseInt(value);
            if (size >= 1 && size <= 500) {
                return size;
            }
        } catch (NumberFormatException e) {
            // the typed error below
        }
        throw new InvalidRequestException("size: a page holds 1 to 500 instances, was '" + value + "'");
    }

    private Mono<String> detail(ServerRequest request, View view) {
        long id = id(request);
        return admin.detail(id)
                .switchIfEmpty(Mono.error(() -> new NotFound("No instance has id " + id + ".")))
                .flatMap(detail -> tree(detail).map(tree -> InstanceDetailPage.detail(view, detail, tree, true, true)));
    }

    /** The first children with their own children, one listing per child (bounded, a few at a time). */
    private Mono<List<InstanceDetailPage.ChildNode>> tree(InstanceDetail detail) {
        List<Instance> children = detail.children().subList(0, Math.min(TREE_CHILDREN, detail.children().size()));
        return Flux.fromIterable(children)
                .flatMapSequential(child -> admin.list(InstanceFilter.builder().parentId(child.id()).build(),
                                PageRequest.oldestFirst(TREE_GRANDCHILDREN))
                        .map(page -> new InstanceDetailPage.ChildNode(child, page.items(), page.hasNext())), 4)
                .collectList()
                .map(nodes -> {
                    List<InstanceDetailPage.ChildNode> all = new ArrayList<>(nodes);
                    for (Instance rest : detail.children().subList(children.size(), detail.children().size())) {
                        all.add(new InstanceDetailPage.ChildNode(rest, List.of(), false));
                    }
                    return all;
                });
    }

    private Mono<String> bulkProgress(ServerRequest request, View view) {
        long id = id(request);
        return Mono.zip(admin.bulkProgress(id), engine.liveEngines()
                        .any(live -> live.queues().contains(DurableAdmin.BULK_QUEUE)))
                .map(both -> ActionPages.bulkProgress(view, both.getT1(), both.getT2()));
    }

    private Mono<String> recurring(View view) {
        List<RecurringJob> jobs = engine.recurringJobs();
        return Flux.fromIterable(jobs)
                .flatMapSequential(job -> admin.list(InstanceFilter.builder()
                                        .correlationKeyPrefix("durable.cron:" + job.name() + "@").build(),
                                PageRequest.newestFirst(1))
                        .map(page -> row(job, page.items().isEmpty() ? null : page.items().get(0))), 4)
                .collectList()
                .map(rows -> EnginePages.recurring(view, rows));
    }

    private static EnginePages.RecurringRow row(RecurringJob job, @Nullable Instance last) {
        return new EnginePages.RecurringRow(job.name(), job.cron().toString(), job.zone().getId(), job.request().type(),
                job.request().queue(), job.cron().next(ZonedDateTime.now(job.zone())).toInstant(), last);
    }

    private Mono<String> limits(View view) {
        List<EnginePages.GateRow> gates = engine.options().gates().values().stream()
                .map(gate -> new EnginePages.GateRow(gate.name(), gate.capacity(), gate.shards())).toList();
        List<EnginePages.RateRow> rates = engine.options().rateLimits().values().stream()
                .map(rate -> new EnginePages.RateRow(rate.name(), rate.ratePerSecond(), rate.burst())).toList();
        return admin.limits().map(usage -> EnginePages.limits(view, gates, rates, usage));
    }

    private Mono<String> engines(View view) {
        return Mono.zip(engine.liveEngines().collectList(), engine.unservedWork().collectList())
                .map(both -> EnginePages.engines(view, both.getT1(), both.getT2()));
    }

    private Mono<ServerResponse> events(ServerRequest request) {
        return allowed(request, DashboardAction.READ).flatMap(ok -> ok
                ? ServerResponse.ok().contentType(MediaType.TEXT_EVENT_STREAM).cacheControl(CacheControl.noStore())
                        .body(BodyInserters.fromServerSentEvents(hub.stream()))
                : ServerResponse.status(HttpStatus.FORBIDDEN).build());
    }

    private Mono<ServerResponse> asset(ServerRequest request) {
        String file = request.pathVariable("file");
        byte[] bytes = assets.get(file);
        if (bytes == null) {
            return ServerResponse.notFound().build();
        }
        return allowed(request, DashboardAction.READ).flatMap(ok -> ok
                ? ServerResponse.ok()
                        .contentType(file.endsWith(".css") ? new MediaType("text", "css", StandardCharsets.UTF_8)
                                : new MediaType("text", "javascript", StandardCharsets.UTF_8))
                        .cacheControl(CacheControl.maxAge(Duration.ofMinutes(10)))
                        .header("X-Content-Type-Options", "nosniff")
                        .bodyValue(bytes)
                : ServerResponse.status(HttpStatus.FORBIDDEN).build());
    }

    // ---- Actions ----------------------------------------------------------------------------------

    private Mono<ServerResponse> instanceAction(ServerRequest request) {
        long id;
        try {
            id = id(request);
        } catch (NotFound e) {
            return ServerResponse.notFound().build();
        }
        String back = options.basePath() + "/instances/" + id;
        return switch (request.pathVariable("action")) {
            case "retry" -> act(request, DashboardAction.RETRY, null,
                    form -> admin.retry(id).then(seeOther(back + "?done=retried")));
            case "cancel" -> act(request, DashboardAction.CANCEL, "Cancel instance #" + id + " and its live children?",
                    form -> admin.cancel(id).flatMap(result -> seeOther(back + "?done=" + switch (result) {
                        case CANCELLED -> "cancelled";
                        case REQUESTED -> "cancel-requested";
                        case ALREADY_SETTLED -> "already-settled";
                        case NOT_FOUND -> throw new NoTargetException("no instance has id " + id);
                    })));
            case "signal" -> act(request, DashboardAction.SIGNAL, null, form -> {
                String name = form.getFirst("name");
                if (name == null || name.isBlank()) {
                    return Mono.error(new InvalidRequestException("a signal needs a name"));
                }
                Object payload = payload(form.getFirst("payload"));
                return admin.signal(id, name.strip(), payload).flatMap(result ->
                        seeOther(back + "?done=" + (result == dev.durable.SignalResult.DELIVERED ? "signalled" : "duplicate")));
            });
            case "run-now" -> act(request, DashboardAction.RUN_NOW, null,
                    form -> admin.runNow(id).then(seeOther(back + "?done=run-now")));
            case "priority" -> act(request, DashboardAction.CHANGE_PRIORITY, null,
                    form -> admin.setPriority(id, priority(form.getFirst("priority")))
                            .then(seeOther(back + "?done=priority")));
            case "replay" -> act(request, DashboardAction.REPLAY, "Replay instance #" + id + " from the chosen step?",
                    form -> admin.replay(id, step(form.getFirst("step")), payload(form.getFirst("state")))
                            .then(seeOther(back + "?done=replayed")));
            case "fork" -> act(request, DashboardAction.FORK, "Start a new instance from a step of #" + id + "?",
                    form -> admin.fork(id, step(form.getFirst("step")), payload(form.getFirst("state")))
                            .flatMap(fork -> seeOther(options.basePath() + "/instances/" + fork + "?done=forked")));
            case "delete" -> act(request, DashboardAction.DELETE, "Delete instance #" + id + " for good?",
                    form -> admin.delete(id).then(seeOther(options.basePath() + "/instances?done=deleted")));
            default -> ServerResponse.notFound().build();
        };
    }

    private static String step(@Nullable String value) {
        if (value == null || value.isBlank()) {
            throw new InvalidRequestException("a replay or fork needs a step");
        }
        return value.strip();
    }

    private static int priority(@Nullable String value) {
        try {
            return Integer.parseInt(String.valueOf(value).strip());
        } catch (NumberFormatException e) {
            throw new InvalidRequestException("priority: a whole number, was '" + value + "'");
        }
    }

    private Mono<ServerResponse> queueAction(ServerRequest request) {
        String queue = request.pathVariable("queue");
        String home = options.basePath() + "/";
        return switch (request.pathVariable("action")) {
            case "pause" -> act(request, DashboardAction.PAUSE_QUEUE,
                    "Pause queue " + queue + " on every engine? Running work finishes; nothing new is picked.",
                    form -> admin.pauseQueue(queue).then(seeOther(home + "?done=paused")));
            case "resume" -> act(request, DashboardAction.PAUSE_QUEUE, null,
                    form -> admin.resumeQueue(queue).then(seeOther(home + "?done=resumed")));
            default -> ServerResponse.notFound().build();
        };
    }

    /** A payload typed into the form: JSON when it parses as JSON, else the text as a JSON string. */
    private @Nullable Object payload(@Nullable String text) {
        if (text == null || text.isBlank()) {
            return null;
        }
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper().readTree(text);
        } catch (IOException notJson) {
            return text;
        }
    }

    private Mono<ServerResponse> bulk(ServerRequest request) {
        return act(request, DashboardAction.BULK, "Act on every instance the filter matches?", form -> {
            FilterForm filterForm = FilterForm.of(form);
            InstanceFilter filter = filterForm.filter();
            String action = String.valueOf(form.getFirst("action"));
            String token = cookieToken(request);
            if (action.equals("run-now")) {
                // Not a bulk job: one statement per batch of due-later rows, answered when done.
                return admin.runNowAll(filter).flatMap(result -> view(request, token == null ? "" : token)
                        .flatMap(view -> html(HttpStatus.OK, ActionPages.bulkDone(view, action, filterForm, result), null)));
            }
            BulkRequest bulk = switch (action) {
                case "retry" -> BulkRequest.retry(filter);
                case "cancel" -> BulkRequest.cancel(filter);
                case "delete" -> BulkRequest.delete(filter);
                case "priority" -> BulkRequest.setPriority(filter, priority(form.getFirst("priority")));
                default -> throw new InvalidRequestException(
                        "action: retry, cancel, delete, run-now or priority, was '" + action + "'");
            };
            return admin.startBulk(bulk).flatMap(id -> seeOther(options.basePath() + "/bulk/" + id));
        });
    }
}
