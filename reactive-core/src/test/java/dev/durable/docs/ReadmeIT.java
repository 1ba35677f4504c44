package dev.durable.docs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.ConflictPolicy;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Fairness;
import dev.durable.InsertResult;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Outcome;
import dev.durable.QueueOptions;
import dev.durable.WorkflowDefinition;
import dev.durable.support.Eventually;
import dev.durable.testing.TestPostgres;
import java.time.Duration;
import java.time.Month;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The Java of the README and the guides under docs/, run as written: each {@code tag::} region below
 * is what one of them shows (DocsSnippetsTest checks that they match). They use the engine's default
 * schema, so they get a database of their own on the test server.
 */
class ReadmeIT {

    private static final Logger log = Loggers.getLogger(ReadmeIT.class);
    private static final Duration WAIT = Duration.ofSeconds(60);
    private static String databaseUrl;

    private final Mailer mailer = new Mailer();
    private final List<DurableEngine> engines = new CopyOnWriteArrayList<>();

    /** Stands in for a mail client. */
    static final class Mailer {
        final List<String> sent = new CopyOnWriteArrayList<>();

        Mono<String> send(Record email) {
            return Mono.fromSupplier(() -> {
                sent.add(email.toString());
                return "sent " + email;
            });
        }
    }

    record Image(String name) {
    }

    record Charge(String customer, long cents) {
    }

    @BeforeAll
    static void database() {
        databaseUrl = TestPostgres.newServerDatabase("readme");
    }

    @AfterEach
    void close() {
        engines.forEach(DurableEngine::close);
    }

    private DurableEngine kept(DurableEngine engine) {
        engines.add(engine);
        return engine;
    }

    @Test
    void aFirstJob() {
        // tag::first-job[]
        record Email(String to, String subject) {}

        DurableEngine engine = DurableEngine.builder(EngineOptions.builder()
                        .url(databaseUrl)                 // r2dbc:postgresql://app:secret@localhost:5432/app
                        .queue(QueueOptions.builder("mail").concurrency(20).prefetch(20).build())
                        .build())
                .register(JobDefinition.of("send-email", Email.class, (Email email) -> mailer.send(email))
                        .queue("mail")
                        .maxAttempts(5)
                        .timeout(Duration.ofSeconds(30)))
                .build();

        engine.start()                                   // applies the schema, starts the queues
              .then(engine.insert(JobRequest.of("send-email", new Email("ada@example.com", "Welcome"))
                      .correlationKey("welcome:ada")))   // a second insert while live is a duplicate
              .subscribe(id -> log.info("enqueued {}", id), error -> log.error("not enqueued", error));
        // end::first-job[]
        kept(engine);
        Eventually.until("the welcome email sent", WAIT, () -> mailer.sent.contains("Email[to=ada@example.com, subject=Welcome]"));
    }

    @Test
    void aFirstWorkflow() {
        // tag::first-workflow[]
        record Order(String id, List<String> items) {}
        record Payment(String method, long cents) {}

        WorkflowDefinition<Order> order = WorkflowDefinition.builder("order", Order.class)
                .queue("orders")
                .step("start", ctx -> Mono.just(
                        Outcome.await(Set.of("paid"), "ship", ctx.state(), Duration.ofHours(1))))
                .step("ship", ctx -> ctx.awaitTimedOut()
                        ? Mono.just(Outcome.fail("not paid within an hour"))
                        : Mono.just(Outcome.spawnChildren(
                                ctx.state().items().stream().map(item -> JobRequest.of("ship-item", item)).toList(),
                                "shipped", ctx.state())))
                .step("shipped", ctx -> Mono.just(Outcome.done(ctx.children().size() + " parcels")))
                .build();
        JobDefinition<String, String> shipItem = JobDefinition.of("ship-item", String.class,
                (String item) -> Mono.just("shipped " + item)).queue("orders");   // every type the workflow inserts

        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().url(databaseUrl).queue("orders").build())
                .register(order)
                .register(shipItem)
                .build();

        engine.start()
              .then(engine.insert(JobRequest.of("order", new Order("o-42", List.of("book", "lamp")))
                      .correlationKey("order:o-42")))                          // the order's business key
              .flatMap(orderId -> engine.signal("order:o-42", "paid", new Payment("card", 4200), "payment-7781")
                      .then(engine.awaitSettled(orderId, Duration.ofMinutes(5))))  // no polling loop
              .subscribe(done -> log.info("order {}: {}", done.status(), done.resultJson()),
                      error -> log.error("order not settled", error));
        // end::first-workflow[]
        kept(engine);
        Instance done = Eventually.until("the order settled", WAIT,
                () -> engine.list("orders", InstanceStatus.DONE, 0, 10)
                        .filter(instance -> instance.type().equals("order")).next().block(WAIT),
                instance -> instance != null);
        assertThat(done.resultJson()).isEqualTo("\"2 parcels\"");
    }

    @Test
    void limits() {
        // tag::limits[]
        EngineOptions options = EngineOptions.builder()
                .url(databaseUrl)
                .gate("partner-api", 8)               // at most 8 executing per key, across every node
                .gate("tenant", 4, 2)                 // 4 per key, counted on 2 shards to spread contention
                .rateLimit("smtp", 50, 100)           // token bucket: 50 a second, bursts of 100
                .build();
        // end::limits[]
        assertThat(options.gates()).containsKeys("partner-api", "tenant");
        assertThat(options.rateLimits()).containsKey("smtp");
    }

    @Test
    void stackedLimits() {
        String tenant = "acme";
        // tag::stacked-limits[]
        EngineOptions options = EngineOptions.builder()
                .url(databaseUrl)
                .gate("global", 16)                                         // 16 executing in all
                .rateLimit("per-tenant", 5, 20)                             // 5 a second per tenant, bursts of 20
                .window("per-tenant-hour", 1000, Duration.ofHours(1))       // at most 1,000 an hour per tenant
                .build();
        JobRequest request = JobRequest.of("sync", tenant)
                .gate("global", "all")
                .rateLimit("per-tenant", tenant)
                .window("per-tenant-hour", tenant);                         // all three, or none of them
        // end::stacked-limits[]
        assertThat(options.windows()).containsKey("per-tenant-hour");
        assertThat(request.window().name()).isEqualTo("per-tenant-hour");
        assertThat(request.rateLimit().name()).isEqualTo("per-tenant");
    }

    @Test
    void fairShareAcrossTenants() {
        // tag::fair-share[]
        Map<String, Integer> tiers = Map.of("initech", 4);                // kept current by the application
        EngineOptions options = EngineOptions.builder()
                .url(databaseUrl)
                .queue(QueueOptions.builder("reports")
                        .fairness(Fairness.builder()
                                .weights(Map.of("acme", 3, "globex", 2))   // static weights
                                .weigher(tenant -> tiers.get(tenant))      // the others, e.g. by plan tier
                                .maxExecutingPerKey(8)                     // per tenant, across the fleet
                                .aging(Duration.ofMinutes(5), -10)         // priorities cannot starve
                                .build())
                        .build())
                .build();
        JobRequest report = JobRequest.of("render-report", "q3").queue("reports").fairnessKey("acme");
        // end::fair-share[]
        Fairness fairness = options.queues().get("reports").fairness();
        assertThat(fairness.weight("acme")).isEqualTo(3.0);
        assertThat(fairness.weight("initech")).isEqualTo(4.0);
        assertThat(fairness.weight("hooli")).isEqualTo(1.0);
        assertThat(options.gates()).containsKey(Fairness.capGate("reports"));
        assertThat(report.fairnessKey()).isEqualTo("acme");
    }

    record Cart(String id, List<String> items) {
    }

    @Test
    void debounceAndReplaceByKey() {
        DurableEngine engine = kept(DurableEngine.builder(EngineOptions.builder().url(databaseUrl).build())
                .register(JobDefinition.of("reindex", String.class, (String customer) -> Mono.just(customer)))
                .register(JobDefinition.of("price-cart", Cart.class, (Cart c) -> Mono.just(c.items().size())))
                .build());
        engine.migrate().block(WAIT);
        String customerId = "c-42";
        Cart cart = new Cart("k-7", List.of("tea"));
        // tag::conflict-policies[]
        // Reindex a customer once their edits have been quiet for 5 s, at most a minute after the first edit.
        Mono<InsertResult> reindex = engine.insertWithResult(JobRequest.of("reindex", customerId)
                .correlationKey("reindex:" + customerId)
                .onConflict(ConflictPolicy.debounce(Duration.ofSeconds(5), Duration.ofMinutes(1))));

        // Price a cart's newest contents: a waiting run takes them, a running one gets one follow-up.
        Mono<InsertResult> reprice = engine.insertWithResult(JobRequest.of("price-cart", cart)
                .correlationKey("cart:" + cart.id())
                .onConflict(ConflictPolicy.replace()));
        // end::conflict-policies[]
        assertThat(reindex.block(WAIT).disposition()).isEqualTo(InsertResult.Disposition.INSERTED);
        assertThat(reindex.block(WAIT).disposition()).isEqualTo(InsertResult.Disposition.REPLACED);
        long priced = reprice.block(WAIT).id();
        assertThat(reprice.block(WAIT)).isEqualTo(new InsertResult(priced, InsertResult.Disposition.REPLACED));
    }

    /** Stand-ins for the clients a team already has. */
    static final class Services {
        Mono<String> resize(Image image) {
            return Mono.just(image.name() + "@2x");
        }

        CompletableFuture<Long> chargeAsync(Charge charge) {
            return CompletableFuture.supplyAsync(() -> charge.cents());
        }

        String buildReport(Month month) throws InterruptedException {
            Thread.sleep(20); // a JDBC query, say
            return "report for " + month;
        }
    }

    @Test
    void handlersOfEveryShape() {
        Services images = new Services();
        Services payments = images;
        Services reports = images;
        // tag::shapes[]
        JobDefinition<Image, String> resize = JobDefinition.of("resize", Image.class,
                (Image image) -> images.resize(image));                 // Mono: runs on the handler scheduler
        JobDefinition<Charge, Long> charge = JobDefinition.ofFuture("charge", Charge.class,
                (Charge c) -> payments.chargeAsync(c));                  // CompletableFuture
        JobDefinition<Month, String> report = JobDefinition.ofBlocking("report", Month.class,
                (Month month) -> reports.buildReport(month));            // blocking: virtual threads on 21+
        // end::shapes[]
        DurableEngine engine = kept(DurableEngine.builder(EngineOptions.builder().url(databaseUrl)
                        .schema("shapes").queue("default").build())
                .register(resize).register(charge).register(report).build());
        engine.start().block(WAIT);
        List<Long> ids = engine.insertAll(List.of(JobRequest.of("resize", new Image("cat.png")),
                JobRequest.of("charge", new Charge("ada", 4200)), JobRequest.of("report", Month.MARCH))).block(WAIT);
        List<String> results = ids.stream().map(id -> engine.awaitSettled(id, WAIT).block().resultJson()).toList();
        assertThat(results).containsExactly("\"cat.png@2x\"", "4200", "\"report for MARCH\"");
    }
}
