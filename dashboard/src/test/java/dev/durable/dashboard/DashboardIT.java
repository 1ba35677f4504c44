package dev.durable.dashboard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.WorkflowDefinition;
import dev.durable.PermanentFailureException;
import dev.durable.QueueOptions;
import dev.durable.RecurringJob;
import dev.durable.admin.DurableAdmin;
import org.springframework.http.server.reactive.ReactorHttpHandlerAdapter;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseCookie;
import org.springframework.test.web.reactive.server.EntityExchangeResult;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.util.LinkedMultiValueMap;
import org.springframework.util.MultiValueMap;
import org.springframework.web.reactive.function.BodyInserters;
import reactor.core.publisher.Mono;

/**
 * The dashboard's routes on the real database: hostile values come out escaped, actions need the CSRF
 * token, read-only mode and the authorizer refuse with 403, destructive actions ask first, paging walks
 * both ways.
 */
@ExtendWith(PostgresExtension.class)
class DashboardIT {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final String HOSTILE = "<script>alert('x')</script>";

    /** Args that fail until they are healed. */
    static final Set<String> BROKEN = ConcurrentHashMap.newKeySet();

    private DurableEngine engine;
    private final List<DurableDashboard> dashboards = new ArrayList<>();

    @BeforeEach
    void start(TestDatabase db) {
        BROKEN.clear();
        engine = DurableEngine.builder(db.engineOptions().name("dashboard-it")
                        .queue(QueueOptions.builder("default").concurrency(4).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build())
                        .queue(QueueOptions.builder(DurableAdmin.BULK_QUEUE).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build())
                        .build())
                .register(JobDefinition.of("flaky", String.class, (String arg) -> BROKEN.contains(arg)
                        ? Mono.<String>error(new PermanentFailureException("broken: " + arg))
                        : Mono.just("ok " + arg)))
                .register(WorkflowDefinition.builder("two-steps", String.class).maxAttempts(1)
                        .step("first", ctx -> Mono.just(Outcome.next("second", ctx.state() + ">first")))
                        .step("second", ctx -> Mono.just(BROKEN.contains(ctx.state().split(">")[0])
                                ? Outcome.fail("broken at second") : Outcome.done(ctx.state() + ">second")))
                        .build())
                .schedule(RecurringJob.of("nightly-<report>", "30 2 * * *", JobRequest.of("flaky", "nightly")))
                .build();
        engine.start().block(WAIT);
    }

    @AfterEach
    void stop() {
        dashboards.forEach(DurableDashboard::close);
        engine.close();
    }

    private WebTestClient client(DashboardOptions options) {
        DurableDashboard dashboard = DurableDashboard.create(engine, options);
        dashboards.add(dashboard);
        return WebTestClient.bindToRouterFunction(dashboard.routes()).configureClient().responseTimeout(WAIT).build();
    }

    private long failed(String arg) {
        BROKEN.add(arg);
        long id = engine.insert(JobRequest.of("flaky", arg).correlationKey("key:" + arg)).block(WAIT);
        assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        return id;
    }

    private static String body(WebTestClient.ResponseSpec response) {
        return new String(response.expectBody().returnResult().getResponseBodyContent(), java.nio.charset.StandardCharsets.UTF_8);
    }

    /** The CSRF cookie a page sets. */
    private static String token(WebTestClient client, String path) {
        EntityExchangeResult<byte[]> page = client.get().uri(path).exchange().expectStatus().isOk().expectBody()
                .returnResult();
        ResponseCookie cookie = page.getResponseCookies().getFirst("durable_dashboard_csrf");
        assertThat(cookie).isNotNull();
        assertThat(cookie.isHttpOnly()).isTrue();
        assertThat(cookie.getSameSite()).isEqualTo("Strict");
        String html = new String(page.getResponseBodyContent(), java.nio.charset.StandardCharsets.UTF_8);
        if (html.contains("name=\"_durable_csrf\"")) {
            assertThat(html).contains("name=\"_durable_csrf\" value=\"" + cookie.getValue() + "\"");
        }
        return cookie.getValue();
    }

    private static MultiValueMap<String, String> form(String... pairs) {
        MultiValueMap<String, String> form = new LinkedMultiValueMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            form.add(pairs[i], pairs[i + 1]);
        }
        return form;
    }

    private WebTestClient.ResponseSpec post(WebTestClient client, String path, String cookie, MultiValueMap<String, String> form) {
        WebTestClient.RequestBodySpec request = client.post().uri(path).contentType(MediaType.APPLICATION_FORM_URLENCODED);
        if (cookie != null) {
            request.cookie("durable_dashboard_csrf", cookie);
        }
        return request.body(BodyInserters.fromFormData(form)).exchange();
    }

    @Test
    void rendersHostileArgsKeysAndErrorsEscaped() {
        long id = failed(HOSTILE);
        WebTestClient client = client(DashboardOptions.defaults());

        for (String path : List.of("/durable/", "/durable/instances", "/durable/instances?status=failed",
                "/durable/instances/" + id, "/durable/instances?key=" + java.net.URLEncoder.encode("key:" + HOSTILE,
                        java.nio.charset.StandardCharsets.UTF_8))) {
            String html = body(client.get().uri(path).exchange().expectStatus().isOk());
            assertThat(html).as(path).doesNotContain(HOSTILE).doesNotContain("<script>alert");
        }
        String detail = body(client.get().uri("/durable/instances/" + id).exchange());
        assertThat(detail).contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;")  // args, key and error
                .contains("broken: &lt;script&gt;");
        // A filter value echoed back into the form and its links is escaped too.
        String search = body(client.get().uri(b -> b.path("/durable/instances").queryParam("error", "{x}")
                .queryParam("type", "{t}").build("\"><svg onload=alert(1)>", "a'b")).exchange());
        assertThat(search).doesNotContain("\"><svg").contains("&quot;&gt;&lt;svg onload=alert(1)&gt;");
        // Security headers: no inline script can run, the page cannot be framed.
        client.get().uri("/durable/").exchange().expectHeader()
                .valueMatches("Content-Security-Policy", ".*script-src 'self'.*frame-ancestors 'none'.*");
    }

    @Test
    void actionsNeedTheCsrfTokenOfTheirCookie() {
        long id = failed("csrf");
        WebTestClient client = client(DashboardOptions.defaults());
        String token = token(client, "/durable/instances/" + id);
        BROKEN.remove("csrf");

        post(client, "/durable/instances/" + id + "/retry", null, form()).expectStatus().isForbidden();
        post(client, "/durable/instances/" + id + "/retry", token, form()).expectStatus().isForbidden();
        post(client, "/durable/instances/" + id + "/retry", null, form("_durable_csrf", token)).expectStatus().isForbidden();
        post(client, "/durable/instances/" + id + "/retry", token, form("_durable_csrf", token + "x")).expectStatus().isForbidden();
        // A token of another server's secret, in both places, is refused too.
        String forged = new dev.durable.dashboard.internal.Csrf(new byte[32]).mint();
        post(client, "/durable/instances/" + id + "/retry", forged, form("_durable_csrf", forged)).expectStatus().isForbidden();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);

        post(client, "/durable/instances/" + id + "/retry", token, form("_durable_csrf", token))
                .expectStatus().isSeeOther()
                .expectHeader().location("/durable/instances/" + id + "?done=retried");
        Instance done = engine.awaitSettled(id, WAIT).block(WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.id()).isEqualTo(id);
        assertThat(body(client.get().uri("/durable/instances/" + id + "?done=retried").exchange()))
                .contains("Retried in place").contains("ok csrf");
    }

    @Test
    void destructiveActionsAskFirstWithoutJavaScript() {
        long id = failed("delete-me");
        WebTestClient client = client(DashboardOptions.defaults());
        String token = token(client, "/durable/instances/" + id);

        String confirm = body(post(client, "/durable/instances/" + id + "/delete", token, form("_durable_csrf", token))
                .expectStatus().isOk());
        assertThat(confirm).contains("Delete instance #" + id + " for good?").contains("name=\"confirm\" value=\"yes\"");
        assertThat(engine.get(id).block(WAIT)).isNotNull();

        post(client, "/durable/instances/" + id + "/delete", token, form("_durable_csrf", token, "confirm", "yes"))
                .expectStatus().isSeeOther();
        assertThat(engine.get(id).blockOptional(WAIT)).isEmpty();
        client.get().uri("/durable/instances/" + id).exchange().expectStatus().isNotFound();
    }

    @Test
    void replayAndForkButtonsPerRecordedStepAskFirstAndLinkTheFork() {
        BROKEN.add("wf");
        long id = engine.insert(JobRequest.of("two-steps", "wf")).block(WAIT);
        assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        WebTestClient client = client(DashboardOptions.defaults());
        String path = "/durable/instances/" + id;
        String token = token(client, path);
        String detail = body(client.get().uri(path).exchange().expectStatus().isOk());
        // Each step's recorded input, with a replay and a fork button (the instance settled).
        assertThat(detail).contains("id=\"step-inputs\"").contains("data-step=\"first\"")
                .contains("data-step=\"second\"").contains("&quot;wf&gt;first&quot;")
                .contains("action=\"" + path + "/replay\"").contains("action=\"" + path + "/fork\"")
                .contains("name=\"step\" value=\"first\"").contains("Replay from here").contains("Fork from here");

        // Without JavaScript the server asks first, carrying the step.
        String confirm = body(post(client, path + "/replay", token, form("_durable_csrf", token, "step", "first"))
                .expectStatus().isOk());
        assertThat(confirm).contains("Replay instance #" + id).contains("name=\"step\" value=\"first\"");
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        // Without the token: refused.
        post(client, path + "/replay", null, form("step", "first", "confirm", "yes")).expectStatus().isForbidden();

        BROKEN.remove("wf");
        post(client, path + "/replay", token, form("_durable_csrf", token, "step", "first", "confirm", "yes"))
                .expectStatus().isSeeOther().expectHeader().location(path + "?done=replayed");
        Instance done = engine.awaitSettled(id, WAIT).block(WAIT);
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.result(String.class)).isEqualTo("wf>first>second");
        String replayed = body(client.get().uri(path + "?done=replayed").exchange());
        assertThat(replayed).contains("Replayed:").contains("data-outcome=\"replayed\"");

        // A fork from step two with a given state opens the new instance, linked both ways.
        String location = post(client, path + "/fork", token,
                form("_durable_csrf", token, "step", "second", "state", "\"given\"", "confirm", "yes"))
                .expectStatus().isSeeOther().returnResult(Void.class).getResponseHeaders().getLocation().toString();
        Matcher forked = Pattern.compile("/durable/instances/(\\d+)\\?done=forked").matcher(location);
        assertThat(forked.matches()).as(location).isTrue();
        long fork = Long.parseLong(forked.group(1));
        assertThat(engine.awaitSettled(fork, WAIT).block(WAIT).result(String.class)).isEqualTo("given>second");
        assertThat(body(client.get().uri("/durable/instances/" + fork).exchange()))
                .contains("id=\"forked-from\"").contains("href=\"" + path + "\"");
        assertThat(body(client.get().uri(path).exchange())).contains("id=\"forks\"")
                .contains("href=\"/durable/instances/" + fork + "\"");

        // Refusals come back as pages: a step the workflow lacks, a replay of a live instance.
        assertThat(body(post(client, path + "/fork", token, form("_durable_csrf", token, "step", "third",
                "confirm", "yes")).expectStatus().isEqualTo(HttpStatus.CONFLICT))).contains("no such step");
        long live = engine.insert(JobRequest.of("two-steps", "later").runIn(Duration.ofHours(1))).block(WAIT);
        String liveDetail = body(client.get().uri("/durable/instances/" + live).exchange());
        assertThat(liveDetail).contains("Fork from here").doesNotContain("Replay from here");
        post(client, "/durable/instances/" + live + "/replay", token,
                form("_durable_csrf", token, "step", "first", "confirm", "yes")).expectStatus().isEqualTo(HttpStatus.CONFLICT);

        // Read-only: no buttons, and the posts are refused; the authorizer is asked about REPLAY and FORK.
        WebTestClient readOnly = client(DashboardOptions.builder().readOnly(true).basePath("/ro").build());
        assertThat(body(readOnly.get().uri("/ro/instances/" + id).exchange())).contains("id=\"step-inputs\"")
                .doesNotContain("method=\"post\"");
        String roToken = token(readOnly, "/ro/");
        post(readOnly, "/ro/instances/" + id + "/fork", roToken,
                form("_durable_csrf", roToken, "step", "first", "confirm", "yes")).expectStatus().isForbidden();
        List<DashboardAction> asked = new java.util.concurrent.CopyOnWriteArrayList<>();
        WebTestClient guarded = client(DashboardOptions.builder().basePath("/g").authorizer((request, action) -> {
            asked.add(action);
            return Mono.just(!action.writes());
        }).build());
        String gToken = token(guarded, "/g/");
        post(guarded, "/g/instances/" + id + "/replay", gToken,
                form("_durable_csrf", gToken, "step", "first", "confirm", "yes")).expectStatus().isForbidden();
        post(guarded, "/g/instances/" + id + "/fork", gToken,
                form("_durable_csrf", gToken, "step", "first", "confirm", "yes")).expectStatus().isForbidden();
        assertThat(asked).contains(DashboardAction.REPLAY, DashboardAction.FORK);
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
    }

    @Test
    void readOnlyModeHidesAndRefusesActions() {
        long id = failed("read-only");
        WebTestClient client = client(DashboardOptions.builder().readOnly(true).basePath("/ops").build());
        String detail = body(client.get().uri("/ops/instances/" + id).exchange().expectStatus().isOk());
        assertThat(detail).contains("broken: read-only").doesNotContain("method=\"post\"");
        assertThat(body(client.get().uri("/ops/instances").exchange())).doesNotContain("method=\"post\"");
        String token = token(client, "/ops/");

        post(client, "/ops/instances/" + id + "/retry", token, form("_durable_csrf", token)).expectStatus().isForbidden();
        post(client, "/ops/bulk", token, form("_durable_csrf", token, "action", "retry", "confirm", "yes"))
                .expectStatus().isForbidden();
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
    }

    @Test
    void theAuthorizerIsAskedForEveryPageAndAction() {
        long id = failed("authz");
        List<DashboardAction> asked = new java.util.concurrent.CopyOnWriteArrayList<>();
        DashboardAuthorizer byHeader = (request, action) -> {
            asked.add(action);
            String role = request.headers().firstHeader("X-Role");
            return Mono.just(role != null && (role.equals("admin") || !action.writes()));
        };
        WebTestClient client = client(DashboardOptions.builder().authorizer(byHeader).build());

        client.get().uri("/durable/").exchange().expectStatus().isForbidden();
        client.get().uri("/durable/events").exchange().expectStatus().isForbidden();
        client.get().uri("/durable/instances/" + id).header("X-Role", "viewer").exchange().expectStatus().isOk();
        EntityExchangeResult<byte[]> page = client.get().uri("/durable/").header("X-Role", "viewer").exchange()
                .expectBody().returnResult();
        String token = page.getResponseCookies().getFirst("durable_dashboard_csrf").getValue();

        client.post().uri("/durable/instances/" + id + "/retry").header("X-Role", "viewer")
                .cookie("durable_dashboard_csrf", token).contentType(MediaType.APPLICATION_FORM_URLENCODED)
                .body(BodyInserters.fromFormData(form("_durable_csrf", token))).exchange().expectStatus().isForbidden();
        assertThat(asked).contains(DashboardAction.READ, DashboardAction.RETRY);
        assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);

        BROKEN.remove("authz");
        client.post().uri("/durable/instances/" + id + "/retry").header("X-Role", "admin")
                .cookie("durable_dashboard_csrf", token).contentType(MediaType.APPLICATION_FORM_URLENCODED)
                .body(BodyInserters.fromFormData(form("_durable_csrf", token))).exchange().expectStatus().isSeeOther();
        assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);

        // A hook that errors or answers nothing refuses.
        WebTestClient broken = client(DashboardOptions.builder().basePath("/a")
                .authorizer((request, action) -> Mono.error(new IllegalStateException("down"))).build());
        broken.get().uri("/a/").exchange().expectStatus().isForbidden();
        WebTestClient silent = client(DashboardOptions.builder().basePath("/b")
                .authorizer((request, action) -> Mono.empty()).build());
        silent.get().uri("/b/").exchange().expectStatus().isForbidden();
    }

    @Test
    void pagesWalkBothWaysAndBulkRetryActsOnTheFilter() {
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 25; i++) {
            ids.add(failed("page-" + i));
        }
        WebTestClient client = client(DashboardOptions.defaults());
        String first = body(client.get().uri("/durable/instances?status=failed&keyPrefix=key:page-&size=20").exchange().expectStatus().isOk());
        assertThat(rowIds(first)).hasSize(20).first().isEqualTo(ids.get(24));
        // Each row shows its type's version, and the listing filters by it.
        assertThat(first).contains("<span class=\"version\">v1</span>");
        assertThat(rowIds(body(client.get().uri("/durable/instances?status=failed&keyPrefix=key:page-&version=2")
                .exchange().expectStatus().isOk()))).isEmpty();
        assertThat(rowIds(body(client.get().uri("/durable/instances?status=failed&keyPrefix=key:page-&version=1&size=50")
                .exchange().expectStatus().isOk()))).hasSize(25);
        String next = link(first, "next");
        String second = body(client.get().uri(java.net.URI.create(next)).exchange().expectStatus().isOk());
        assertThat(rowIds(second)).containsExactly(ids.get(4), ids.get(3), ids.get(2), ids.get(1), ids.get(0));
        String back = body(client.get().uri(java.net.URI.create(link(second, "prev"))).exchange().expectStatus().isOk());
        assertThat(rowIds(back)).isEqualTo(rowIds(first));
        assertThat(back).doesNotContain("id=\"prev\"");

        String token = token(client, "/durable/instances");
        BROKEN.clear();
        String progress = post(client, "/durable/bulk", token,
                form("_durable_csrf", token, "confirm", "yes", "action", "retry", "status", "failed", "keyPrefix", "key:page-"))
                .expectStatus().isSeeOther().returnResult(Void.class).getResponseHeaders().getLocation().toString();
        assertThat(progress).matches("/durable/bulk/\\d+");
        long deadline = System.nanoTime() + WAIT.toNanos();
        String result = body(client.get().uri(progress).exchange().expectStatus().isOk());
        while (!result.contains(">100 %<") && System.nanoTime() < deadline) {
            sleep(200);
            result = body(client.get().uri(progress).exchange().expectStatus().isOk());
        }
        assertThat(result).contains(">100 %<").contains("Matched</dt><dd>25</dd>").contains("Affected</dt><dd>25</dd>")
                .doesNotContain("http-equiv=\"refresh\"");
        for (long id : ids) {
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        }
        // A filter that does not parse is a 400 page naming the field.
        assertThat(body(client.get().uri("/durable/instances?insertedFrom=yesterday").exchange()
                .expectStatus().isEqualTo(HttpStatus.BAD_REQUEST))).contains("insertedFrom");
    }

    @Test
    void priorityAndRunNowActOnAWaitingInstance() {
        long id = engine.insert(JobRequest.of("flaky", "later").runIn(Duration.ofHours(1))).block(WAIT);
        WebTestClient client = client(DashboardOptions.defaults());
        String detail = body(client.get().uri("/durable/instances/" + id).exchange().expectStatus().isOk());
        assertThat(detail).contains("/instances/" + id + "/run-now").contains("/instances/" + id + "/priority");
        String token = token(client, "/durable/instances/" + id);

        post(client, "/durable/instances/" + id + "/priority", token, form("_durable_csrf", token, "priority", "7"))
                .expectStatus().isSeeOther().expectHeader().location("/durable/instances/" + id + "?done=priority");
        assertThat(engine.get(id).block(WAIT).priority()).isEqualTo(7);
        post(client, "/durable/instances/" + id + "/priority", token, form("_durable_csrf", token, "priority", "high"))
                .expectStatus().isBadRequest();

        post(client, "/durable/instances/" + id + "/run-now", token, form("_durable_csrf", token))
                .expectStatus().isSeeOther();
        assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        // Settled now: run-now does not apply, and says so.
        assertThat(body(post(client, "/durable/instances/" + id + "/run-now", token, form("_durable_csrf", token))
                .expectStatus().isEqualTo(HttpStatus.CONFLICT))).contains("Not possible now");
    }

    @Test
    void mountsInAPlainWebFluxServerWhereTheHookDecides() throws Exception {
        Set<String> operators = Set.of("ada");
        // tag::mount-webflux[]
        DurableDashboard dashboard = DurableDashboard.create(engine, DashboardOptions.builder()
                .basePath("/ops/jobs")                                  // anywhere in the application
                .title("Acme jobs")
                .authorizer((request, action) -> request.principal()    // the application's security decides
                        .map(user -> !action.writes() || operators.contains(user.getName()))
                        .defaultIfEmpty(false))
                .build());
        RouterFunction<ServerResponse> routes = dashboard.routes();     // a @Bean, or served as here
        DisposableServer server = HttpServer.create().host("127.0.0.1").port(0)
                .handle(new ReactorHttpHandlerAdapter(RouterFunctions.toHttpHandler(routes)))
                .bindNow();
        // end::mount-webflux[]
        dashboards.add(dashboard);
        try {
            // Nobody signed in here: the hook refuses the page.
            java.net.http.HttpResponse<String> page = java.net.http.HttpClient.newHttpClient().send(
                    java.net.http.HttpRequest.newBuilder(java.net.URI.create(
                            "http://127.0.0.1:" + server.port() + "/ops/jobs/")).build(),
                    java.net.http.HttpResponse.BodyHandlers.ofString());
            assertThat(page.statusCode()).isEqualTo(403);
            assertThat(page.body()).contains("Acme jobs").contains("You may not read this dashboard.");
        } finally {
            server.disposeNow(WAIT);
        }
    }

    /**
     * Two replicas, each a dashboard over its own engine on the same database, with no secret configured:
     * a form one rendered posts to the other (both sign with the secret the engines share through the
     * database); a dashboard given a secret of its own refuses that token.
     */
    @Test
    void replicasWithoutASecretOfTheirOwnAcceptEachOthersForms(TestDatabase db) {
        long id = failed("replica");
        DurableEngine other = DurableEngine.builder(db.engineOptions().name("replica-b").build()).build();
        other.start().block(WAIT);
        try {
            WebTestClient a = client(DashboardOptions.defaults());
            DurableDashboard b = DurableDashboard.create(other, DashboardOptions.defaults());
            dashboards.add(b);
            WebTestClient replica = WebTestClient.bindToRouterFunction(b.routes()).configureClient()
                    .responseTimeout(WAIT).build();
            String token = token(a, "/durable/instances/" + id);
            BROKEN.remove("replica");

            WebTestClient own = client(DashboardOptions.builder().csrfSecret(new byte[32]).build());
            post(own, "/durable/instances/" + id + "/retry", token, form("_durable_csrf", token)).expectStatus()
                    .isForbidden();
            post(replica, "/durable/instances/" + id + "/retry", token, form("_durable_csrf", token)).expectStatus()
                    .isSeeOther().expectHeader().location("/durable/instances/" + id + "?done=retried");
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            assertThat(other.admin().sharedSecret("durable.dashboard.csrf").block(WAIT))
                    .isEqualTo(engine.admin().sharedSecret("durable.dashboard.csrf").block(WAIT));
        } finally {
            other.close();
        }
    }

    /**
     * Behind an application context path (WebFlux's {@code spring.webflux.base-path}, which the routes never
     * see), every link, redirect and the cookie's path carry it.
     */
    @Test
    void honoursTheApplicationsContextPath() throws Exception {
        DurableDashboard dashboard = DurableDashboard.create(engine, DashboardOptions.builder().basePath("/ops").build());
        dashboards.add(dashboard);
        org.springframework.http.server.reactive.HttpHandler app =
                new org.springframework.http.server.reactive.ContextPathCompositeHandler(
                        java.util.Map.of("/app", RouterFunctions.toHttpHandler(dashboard.routes())));
        DisposableServer server = HttpServer.create().host("127.0.0.1").port(0)
                .handle(new ReactorHttpHandlerAdapter(app)).bindNow();
        try {
            java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
            String root = "http://127.0.0.1:" + server.port();
            java.net.http.HttpResponse<String> bare = http.send(java.net.http.HttpRequest.newBuilder(
                    java.net.URI.create(root + "/app/ops")).build(), java.net.http.HttpResponse.BodyHandlers.ofString());
            assertThat(bare.statusCode()).isEqualTo(308);
            assertThat(bare.headers().firstValue("Location")).hasValue("/app/ops/");

            java.net.http.HttpResponse<String> page = http.send(java.net.http.HttpRequest.newBuilder(
                    java.net.URI.create(root + "/app/ops/")).build(), java.net.http.HttpResponse.BodyHandlers.ofString());
            assertThat(page.statusCode()).isEqualTo(200);
            assertThat(page.body()).contains("href=\"/app/ops/instances\"").contains("src=\"/app/ops/static/dashboard.js\"")
                    .contains("data-base=\"/app/ops\"").contains("action=\"/app/ops/queues/default/pause\"")
                    .doesNotContain("href=\"/ops/");
            String cookie = page.headers().firstValue("Set-Cookie").orElseThrow();
            assertThat(cookie).contains("Path=/app/ops");
            String token = cookie.substring(cookie.indexOf('=') + 1, cookie.indexOf(';'));

            // Without a script, a destructive action answers a confirmation whose form posts back under the path.
            java.net.http.HttpResponse<String> confirm = http.send(java.net.http.HttpRequest.newBuilder(
                            java.net.URI.create(root + "/app/ops/queues/default/pause"))
                    .header("Content-Type", "application/x-www-form-urlencoded")
                    .header("Cookie", "durable_dashboard_csrf=" + token)
                    .POST(java.net.http.HttpRequest.BodyPublishers.ofString("_durable_csrf=" + token))
                    .build(), java.net.http.HttpResponse.BodyHandlers.ofString());
            assertThat(confirm.statusCode()).isEqualTo(200);
            assertThat(confirm.body()).contains("action=\"/app/ops/queues/default/pause\"");

            java.net.http.HttpResponse<String> paused = http.send(java.net.http.HttpRequest.newBuilder(
                            java.net.URI.create(root + "/app/ops/queues/default/pause"))
                    .header("Content-Type", "application/x-www-form-urlencoded")
                    .header("Cookie", "durable_dashboard_csrf=" + token)
                    .POST(java.net.http.HttpRequest.BodyPublishers.ofString("_durable_csrf=" + token + "&confirm=yes"))
                    .build(), java.net.http.HttpResponse.BodyHandlers.ofString());
            assertThat(paused.statusCode()).isEqualTo(303);
            assertThat(paused.headers().firstValue("Location")).hasValue("/app/ops/?done=paused");
            assertThat(engine.admin().pausedQueues().block(WAIT)).extracting(dev.durable.admin.QueuePause::queue)
                    .contains("default");
        } finally {
            engine.admin().resumeQueue("default").block(WAIT);
            server.disposeNow(WAIT);
        }
    }

    /**
     * The activity chart reads the fleet's minutes from the database: the outcomes run here are on it, in
     * every range, for every queue and for the queue chosen, and no range draws another queue's.
     */
    @Test
    void theActivityChartShowsTheFleetsOutcomesFromTheDatabase() {
        BROKEN.add("chart-bad");
        long[] before = totals(null);
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            ids.add(engine.insert(JobRequest.of("flaky", i == 0 ? "chart-bad" : "chart-" + i)).block(WAIT));
        }
        ids.forEach(id -> engine.awaitSettled(id, WAIT).block(WAIT));
        WebTestClient client = client(DashboardOptions.defaults());
        // The class's other tests ran outcomes on the same database: the page must show what the admin reads,
        // once this test's failure is in it (the engine adds its counts every heartbeat interval).
        long deadline = System.nanoTime() + WAIT.toNanos();
        String overview;
        long[] totals;
        do {
            sleep(200);
            totals = totals(null);
            overview = body(client.get().uri("/durable/").exchange().expectStatus().isOk());
        } while ((totals[0] < before[0] + 5 || totals[1] < before[1] + 1 || !overview.contains("id=\"chart-failed\">" + totals[1] + "<")
                || !overview.contains("id=\"chart-completed\">" + totals[0] + "<")) && System.nanoTime() < deadline);
        assertThat(totals[0]).isGreaterThanOrEqualTo(before[0] + 5);
        assertThat(totals[1]).isGreaterThanOrEqualTo(before[1] + 1);
        assertThat(overview).contains("id=\"chart-failed\">" + totals[1] + "<")
                .contains("id=\"chart-completed\">" + totals[0] + "<")
                .contains("data-live=\"1\"").contains("<rect class=\"ok\" data-i=\"59\"");
        String day = body(client.get().uri("/durable/?range=24h&queue=default").exchange().expectStatus().isOk());
        assertThat(day).contains("data-live=\"0\"").contains("<rect class=\"ok\" data-i=\"95\"")
                .doesNotContain("data-i=\"96\"").contains("per 15 min");
        assertThat(Long.parseLong(day.replaceAll("(?s).*id=\"chart-failed\">(\\d+)<.*", "$1"))).isPositive();
        String elsewhere = body(client.get().uri("/durable/?range=6h&queue=nothing-ran-here").exchange()
                .expectStatus().isOk());
        assertThat(elsewhere).contains("id=\"chart-completed\">0<").contains("id=\"chart-failed\">0<");
    }

    @Test
    void recurringLimitsAndEnginesPagesShowWhatTheEngineKnows() {
        WebTestClient client = client(DashboardOptions.defaults());
        String recurring = body(client.get().uri("/durable/recurring").exchange().expectStatus().isOk());
        assertThat(recurring).contains("nightly-&lt;report&gt;").contains("30 2 * * *").contains("02:30:00Z")
                .doesNotContain("nightly-<report>");
        String engines = body(client.get().uri("/durable/engines").exchange().expectStatus().isOk());
        assertThat(engines).contains("dashboard-it").contains("default, durable.admin").contains("flaky v1");
        String limits = body(client.get().uri("/durable/limits").exchange().expectStatus().isOk());
        assertThat(limits).contains("No gate configured on this engine.");
    }

    @Test
    void theLimitsPageShowsHeldClaimsPerKeyAndSpentBuckets(TestDatabase db) {
        reactor.core.publisher.Sinks.Empty<Void> release = reactor.core.publisher.Sinks.empty();
        DurableEngine limited = DurableEngine.builder(db.engineOptions().name("limits-it")
                        .queue(QueueOptions.builder("limited").concurrency(4).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build())
                        .gate("partner", 2).rateLimit("smtp", 0.001, 5).build())
                .register(JobDefinition.of("held", String.class, (String s) -> release.asMono().thenReturn("released"))
                        .queue("limited"))
                .register(JobDefinition.of("mail", String.class, (String s) -> Mono.just("sent")).queue("limited"))
                .build();
        limited.start().block(WAIT);
        DurableDashboard dashboard = DurableDashboard.create(limited, DashboardOptions.defaults());
        dashboards.add(dashboard);
        WebTestClient client = WebTestClient.bindToRouterFunction(dashboard.routes()).configureClient()
                .responseTimeout(WAIT).build();
        try {
            for (int i = 0; i < 3; i++) {
                limited.insert(JobRequest.of("held", "h" + i).gate("partner", HOSTILE)).block(WAIT);
            }
            long mail = limited.insert(JobRequest.of("mail", "m").rateLimit("smtp", 3, "tenant-1")).block(WAIT);
            limited.awaitSettled(mail, WAIT).block(WAIT);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (limited.admin().limits().block(WAIT).gates().stream().noneMatch(g -> g.held() == 2)
                    && System.nanoTime() < deadline) {
                sleep(100);
            }
            String html = body(client.get().uri("/durable/limits").exchange().expectStatus().isOk());
            String escapedKey = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;";
            assertThat(html).doesNotContain(HOSTILE).contains("data-gate=\"partner\"")
                    .contains("data-key=\"" + escapedKey + "\"")
                    .contains("<td class=\"num held\">2</td><td class=\"num\">2</td>").contains("100 %")
                    .contains("data-bucket=\"smtp\"").contains("data-partition=\"tenant-1\"")
                    .contains("0.001 tokens a second, burst 5.");
            Matcher tokens = Pattern.compile("<td class=\"num tokens\">([0-9.]+)</td><td class=\"num\">5</td>")
                    .matcher(html);
            assertThat(tokens.find()).isTrue();
            assertThat(Double.parseDouble(tokens.group(1))).isGreaterThanOrEqualTo(2).isLessThan(3);
        } finally {
            release.tryEmitEmpty();
            limited.close();
        }
    }

    @Test
    void theLiveFeedSendsCountsAndEvents() {
        WebTestClient client = client(DashboardOptions.defaults());
        long id = engine.insert(JobRequest.of("flaky", "live")).block(WAIT);
        engine.awaitSettled(id, WAIT).block(WAIT);
        List<String> events = client.get().uri("/durable/events").accept(MediaType.TEXT_EVENT_STREAM).exchange()
                .expectStatus().isOk().returnResult(String.class).getResponseBody()
                .take(Duration.ofSeconds(5)).collectList().block(WAIT);
        assertThat(String.join("\n", events)).contains("\"kind\":\"COMPLETED\"").contains("\"counts\"")
                .contains("\"committing\":0");
        String overview = body(client.get().uri("/durable/").exchange());
        assertThat(overview).contains("data-queue=\"default\"").contains("id=\"chart\"")
                .contains(">Committing here</th>").contains("data-now=\"committing\">0</td>");
    }

    /** The last hour's completed and failed runs as the admin reads them, of one queue or (null) all. */
    private long[] totals(String queue) {
        long[] totals = new long[2];
        for (dev.durable.admin.QueueActivity minute : engine.admin().activity(Duration.ofHours(1), Duration.ofMinutes(1),
                queue).block(WAIT)) {
            totals[0] += minute.completed();
            totals[1] += minute.failed();
        }
        return totals;
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static List<Long> rowIds(String html) {
        List<Long> ids = new ArrayList<>();
        Matcher m = Pattern.compile("<tr data-id=\"(\\d+)\"").matcher(html);
        while (m.find()) {
            ids.add(Long.parseLong(m.group(1)));
        }
        return ids;
    }

    private static String link(String html, String id) {
        Matcher m = Pattern.compile("id=\"" + id + "\" href=\"([^\"]+)\"").matcher(html);
        assertThat(m.find()).as("link " + id).isTrue();
        return m.group(1).replace("&amp;", "&");
    }

}
