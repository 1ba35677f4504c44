package dev.durable.dashboard;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import dev.durable.Backoff;
import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.QueueActivity;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.Dimension;
import org.openqa.selenium.JavascriptExecutor;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.support.ui.ExpectedConditions;
import org.openqa.selenium.support.ui.FluentWait;
import org.openqa.selenium.support.ui.Select;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.http.server.reactive.ContextPathCompositeHandler;
import org.springframework.http.server.reactive.HttpHandler;
import org.springframework.http.server.reactive.ReactorHttpHandlerAdapter;
import org.springframework.web.reactive.function.server.RouterFunctions;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/**
 * The dashboard in headless Chromium (Debian's {@code chromium} and {@code chromium-driver}), served by
 * Reactor Netty on the real database: finds a failed instance older than the newest 100 through the search,
 * reads its error in its attempt history, retries it in place and sees it done, redrives the other failures with
 * a bulk retry; pauses a queue behind an application context path and sees its rows wait, then resumes it;
 * bulk-cancels thousands of rows by filter and watches the progress reach 100 %; reads the activity chart again
 * after the engine and the dashboard restarted; checks the layout at 1400 and 420 px; saves the screenshots
 * docs/operations.md shows (to {@code docs/} with {@code -Ddashboard.screenshots=docs}).
 *
 * <p>Without Chromium the test is skipped, unless {@code CI=true}: CI installs it
 * ({@code .ci/install-chromium}), so there a missing browser is a failure, not a skip.
 */
@ExtendWith(PostgresExtension.class)
class DashboardBrowserIT {

    private static final Path CHROMIUM = Path.of(System.getProperty("chromium.binary", "/usr/bin/chromium"));
    private static final Path CHROMEDRIVER = Path.of(System.getProperty("chromium.driver", "/usr/bin/chromedriver"));
    private static final Duration WAIT = Duration.ofSeconds(60);
    /** A bulk job over thousands of rows: its pace is the machine's, so its cap is generous. */
    private static final Duration BULK_WAIT = Duration.ofMinutes(5);
    /**
     * Where the screenshots go: target/screenshots, or the repository's docs/ (the guides') when run
     * with {@code -Ddashboard.screenshots=docs}, so a test run leaves the committed images alone.
     */
    private static final Path DOCS = "docs".equals(System.getProperty("dashboard.screenshots"))
            ? Path.of("..", "docs") : Path.of("target", "screenshots");

    static final Set<String> BROKEN = ConcurrentHashMap.newKeySet();

    @TempDir
    Path profile;

    private DurableEngine engine;
    private DurableDashboard dashboard;
    private DisposableServer server;
    private String context = "";

    @BeforeEach
    void start(TestDatabase db) {
        requireChromium();
        BROKEN.clear();
        engine = DurableEngine.builder(db.engineOptions().name("browser-it").heartbeatInterval(Duration.ofMillis(500))
                        .queue(QueueOptions.builder("payments").concurrency(8).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build())
                        .queue(QueueOptions.builder("mail").concurrency(4).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build())
                        .queue(QueueOptions.builder(DurableAdmin.BULK_QUEUE).pollInterval(Duration.ofMillis(100))
                                .maxPollInterval(Duration.ofMillis(200)).build())
                        .build())
                .register(JobDefinition.of("charge-card", Order.class, (Order order) -> BROKEN.contains(order.customer())
                        ? Mono.<String>error(new IllegalStateException("card declined for " + order.customer()
                                + ": issuer timeout"))
                        : Mono.just("charged " + order.amount()))
                        .queue("payments").maxAttempts(3).backoff(Backoff.fixed(Duration.ofMillis(50))))
                .register(JobDefinition.of("send-receipt", String.class, (String to) -> Mono.just("sent to " + to))
                        .queue("mail"))
                .build();
        engine.start().block(WAIT);
        serve("");
    }

    /** The dashboard over {@link #engine}, served under the application context path {@code context} ("" for none). */
    private void serve(String context) {
        this.context = context;
        dashboard = DurableDashboard.create(engine, DashboardOptions.builder().title("Acme jobs").build());
        HttpHandler routes = RouterFunctions.toHttpHandler(dashboard.routes());
        server = HttpServer.create().host("127.0.0.1").port(0)
                .handle(new ReactorHttpHandlerAdapter(context.isEmpty() ? routes
                        : new ContextPathCompositeHandler(Map.of(context, routes))))
                .bindNow(WAIT);
    }

    private final List<WebDriver> browsers = new ArrayList<>();

    @AfterEach
    void stop() {
        browsers.forEach(WebDriver::quit);
        if (server != null) {
            server.disposeNow(WAIT);
        }
        if (dashboard != null) {
            dashboard.close();
        }
        if (engine != null) {
            engine.close();
        }
    }

    public record Order(String customer, int amount) {
    }

    private String url(String path) {
        return "http://127.0.0.1:" + server.port() + context + "/durable" + path;
    }

    private WebDriver browser() {
        ChromeDriverService service = new ChromeDriverService.Builder()
                .usingDriverExecutable(CHROMEDRIVER.toFile()).usingAnyFreePort().build();
        WebDriver browser = new ChromeDriver(service, options());
        browser.manage().window().setSize(new Dimension(1400, 1000));
        browsers.add(browser);
        return browser;
    }

    private static FluentWait<WebDriver> waiting(WebDriver browser) {
        return new WebDriverWait(browser, WAIT).ignoring(StaleElementReferenceException.class);
    }

    @Test
    void findsAnOldFailureRetriesItInPlaceAndSeesItDone() throws IOException {
        BROKEN.add("c-0042");
        long old = engine.insert(JobRequest.of("charge-card", new Order("c-0042", 1999))
                .correlationKey("order:7781")).block(WAIT);
        assertThat(engine.awaitSettled(old, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.FAILED);
        // 150 newer instances, some of them failed too: the old failure is far from the first page.
        List<JobRequest> newer = new ArrayList<>();
        for (int i = 0; i < 150; i++) {
            String customer = "c-" + (1000 + i);
            if (i % 25 == 0) {
                BROKEN.add(customer);
            }
            newer.add(i % 3 == 0 ? JobRequest.of("send-receipt", customer + "@example.com")
                    : JobRequest.of("charge-card", new Order(customer, 100 + i)));
        }
        List<Long> ids = engine.insertAll(newer).block(WAIT);
        for (long id : ids) {
            engine.awaitSettled(id, WAIT).block(WAIT);
        }

        WebDriver browser = browser();
        FluentWait<WebDriver> wait = waiting(browser);

        // The newest 100 do not hold it.
        browser.get(url("/instances?size=100"));
        assertThat(browser.findElements(By.cssSelector("#instances tr[data-id='" + old + "']"))).isEmpty();

        // The search does: failed, with its error text.
        browser.findElement(By.cssSelector("input[name='status'][value='failed']")).click();
        browser.findElement(By.id("f-error")).sendKeys("issuer timeout");
        browser.findElement(By.id("search")).click();
        wait.until(ExpectedConditions.presenceOfElementLocated(
                By.cssSelector("#instances tr[data-id='" + old + "'][data-status='failed']")));
        browser.findElement(By.cssSelector("#instances tr[data-id='" + old + "'] td.num a")).click();

        // Why it failed, attempt by attempt: two retried, the third failed for good.
        String error = wait.until(driver -> driver.findElement(
                By.cssSelector("#attempts li[data-outcome='failed'] pre.error"))).getText();
        assertThat(error).contains("card declined for c-0042");
        assertThat(browser.findElements(By.cssSelector("#attempts li[data-outcome='retried']"))).hasSize(2);
        assertThat(browser.findElement(By.id("last-error")).getText()).contains("card declined for c-0042");
        assertThat(browser.findElement(By.id("state")).getText()).contains("\"customer\" : \"c-0042\"");
        screenshot(browser, DOCS.resolve("dashboard-instance.png"));

        BROKEN.remove("c-0042");
        browser.findElement(By.cssSelector("#actions button.retry")).click();
        wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("notice"), "Retried in place"));
        assertThat(engine.awaitSettled(old, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        wait.until(driver -> {
            driver.navigate().refresh();
            return driver.findElement(By.cssSelector("p.subtitle .badge")).getText().equals("done");
        });
        assertThat(browser.getCurrentUrl()).endsWith("/durable/instances/" + old + "?done=retried");
        assertThat(browser.findElement(By.id("result")).getText()).contains("charged 1999");

        // Fork it from its one step: a dialog asks, and the new instance's page links back to it.
        browser.findElement(By.cssSelector("#step-inputs tr[data-step='run'] button.fork")).click();
        wait.until(ExpectedConditions.elementToBeClickable(By.id("confirm-ok"))).click();
        wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("notice"), "Forked"));
        long fork = Long.parseLong(browser.getCurrentUrl().replaceAll(".*/instances/(\\d+)\\?done=forked$", "$1"));
        assertThat(fork).isNotEqualTo(old);
        assertThat(browser.findElement(By.cssSelector("#forked-from a")).getText()).isEqualTo("#" + old);
        assertThat(engine.awaitSettled(fork, WAIT).block(WAIT).result(String.class)).isEqualTo("charged 1999");

        // The overview: counts per queue, live over SSE, the chart of the last hour.
        browser.get(url("/"));
        wait.until(ExpectedConditions.textToBe(By.id("connection"), "live"));
        long done = Long.parseLong(browser.findElement(
                By.cssSelector("#queues tr[data-queue='payments'] td[data-status='done']")).getText());
        assertThat(done).isGreaterThanOrEqualTo(90);
        // Numeric columns and their headers align right.
        assertThat(browser.findElement(By.cssSelector("#queues th.num")).getCssValue("text-align")).isEqualTo("right");
        assertThat(browser.findElement(By.cssSelector("#queues td.num")).getCssValue("text-align")).isEqualTo("right");
        // A new instance shows up in the live feed and the counts without a reload.
        long live = engine.insert(JobRequest.of("send-receipt", "live@example.com")).block(WAIT);
        wait.until(ExpectedConditions.presenceOfElementLocated(
                By.cssSelector("#feed li[data-id='" + live + "'][data-kind='COMPLETED']")));
        screenshot(browser, DOCS.resolve("dashboard-overview.png"));

        // Redrive the other failed payments with a bulk retry over the filter: a durable job to 100 %.
        BROKEN.clear();
        browser.get(url("/instances?status=failed&type=charge-card"));
        List<Long> failedPayments = browser.findElements(By.cssSelector("#instances tbody tr[data-id]")).stream()
                .map(row -> Long.parseLong(row.getDomAttribute("data-id"))).toList();
        assertThat(failedPayments).hasSize(4); // c-1025, c-1050, c-1100, c-1125 (0 and 75 are receipts)
        new Select(browser.findElement(By.id("bulk-action"))).selectByValue("retry");
        browser.findElement(By.id("bulk-submit")).click();
        wait.until(ExpectedConditions.elementToBeClickable(By.id("confirm-ok"))).click();
        wait.until(ExpectedConditions.textToBe(By.id("bulk-percent"), "100 %"));
        assertThat(browser.findElement(By.id("bulk-result")).getText()).contains("Matched\n4");
        for (long id : failedPayments) {
            assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        }

        // At 420 px the page does not scroll sideways: wide tables scroll in their own box.
        browser.manage().window().setSize(new Dimension(420, 900));
        for (String path : List.of("/", "/instances", "/instances/" + old, "/limits", "/engines")) {
            browser.get(url(path));
            long overflow = (Long) ((JavascriptExecutor) browser).executeScript(
                    "return document.documentElement.scrollWidth - document.documentElement.clientWidth;");
            assertThat(overflow).as("horizontal overflow of " + path + " at 420 px").isLessThanOrEqualTo(0);
            screenshot(browser, Path.of("target", "screenshots", "narrow" + path.replace('/', '-') + ".png"));
        }
    }

    /**
     * Behind an application context path: the overview's pause button (confirmed in a dialog) stops the queue
     * on every engine, a row inserted after it waits and shows as due, and resume lets it run.
     */
    @Test
    void pausesAQueueSeesItsRowsWaitAndResumesIt() {
        server.disposeNow(WAIT);
        dashboard.close();
        serve("/app");
        WebDriver browser = browser();
        FluentWait<WebDriver> wait = waiting(browser);
        browser.get(url("/"));
        wait.until(ExpectedConditions.textToBe(By.id("connection"), "live"));
        browser.findElement(By.cssSelector("#queues tr[data-queue='mail'] button.pause")).click();
        wait.until(ExpectedConditions.elementToBeClickable(By.id("confirm-ok"))).click();
        wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("notice"), "paused"));
        assertThat(browser.getCurrentUrl()).endsWith("/app/durable/?done=paused");
        assertThat(browser.findElement(By.cssSelector("#queues tr[data-queue='mail'] td.state")).getText())
                .contains("paused");
        // Due a second from now: claim-on-insert (which learns of a pause only at the next registry refresh)
        // leaves it, so what keeps it waiting is the pick's own check of the pause, as for any due row.
        long held = engine.insert(JobRequest.of("send-receipt", "held@example.com")
                .runAt(java.time.Instant.now().plusSeconds(1))).block(WAIT);
        wait.until(ExpectedConditions.presenceOfElementLocated(
                By.cssSelector("#feed li[data-id='" + held + "'][data-kind='INSERTED']")));
        // The live counts show it due, fleet-wide, and nothing picks it.
        wait.until(ExpectedConditions.textToBe(By.cssSelector("#queues tr[data-queue='mail'] td[data-now='due']"), "1"));
        sleep(Duration.ofSeconds(2));
        assertThat(browser.findElements(By.cssSelector("#feed li[data-id='" + held + "'][data-kind='PICKED']"))).isEmpty();
        assertThat(engine.get(held).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);

        browser.findElement(By.cssSelector("#queues tr[data-queue='mail'] button.resume")).click();
        wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("notice"), "resumed"));
        assertThat(engine.awaitSettled(held, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
        wait.until(ExpectedConditions.presenceOfElementLocated(
                By.cssSelector("#feed li[data-id='" + held + "'][data-kind='COMPLETED']")));
        wait.until(ExpectedConditions.textToBe(By.cssSelector("#queues tr[data-queue='mail'] td[data-now='due']"), "0"));
    }

    /**
     * Thousands of payments scheduled for later, cancelled by a filter: the bulk job's page refreshes itself
     * until 100 %, its percentage never goes back, and every matched row ends cancelled; others are untouched.
     */
    @Test
    void bulkCancelsByFilterAndWatchesItsProgress() {
        java.time.Instant later = java.time.Instant.now().plus(Duration.ofHours(1));
        List<JobRequest> scheduled = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            scheduled.add(JobRequest.of("charge-card", new Order("c-" + i, i)).runAt(later));
        }
        List<Long> ids = engine.insertAll(scheduled).block(WAIT);
        long receipt = engine.insert(JobRequest.of("send-receipt", "kept@example.com").runAt(later)).block(WAIT);

        WebDriver browser = browser();
        FluentWait<WebDriver> wait = waiting(browser);
        browser.get(url("/instances?status=runnable&type=charge-card&size=10"));
        new Select(browser.findElement(By.id("bulk-action"))).selectByValue("cancel");
        browser.findElement(By.id("bulk-submit")).click();
        wait.until(ExpectedConditions.elementToBeClickable(By.id("confirm-ok"))).click();
        wait.until(ExpectedConditions.presenceOfElementLocated(By.id("bulk-percent")));
        List<Integer> seen = new ArrayList<>();
        // 3,000 cancels, each its own statements, four at a time: 25-75 s from one machine to another
        // (a slow one went through 2,500 in 60 s, still advancing), so the cap is not the page's WAIT.
        new WebDriverWait(browser, BULK_WAIT).ignoring(StaleElementReferenceException.class).until(driver -> {
            int percent = Integer.parseInt(driver.findElement(By.id("bulk-percent")).getText().replace(" %", ""));
            if (seen.isEmpty() || seen.get(seen.size() - 1) != percent) {
                seen.add(percent);
            }
            return percent == 100 && driver.findElement(By.id("bulk-result")).getText().contains("Affected\n3000");
        });
        assertThat(seen).isSorted().endsWith(100);
        assertThat(browser.findElement(By.id("bulk-result")).getText()).contains("Matched\n3000");
        for (long id : List.of(ids.get(0), ids.get(1500), ids.get(2999))) {
            assertThat(engine.get(id).block(WAIT).status()).isEqualTo(InstanceStatus.CANCELLED);
        }
        assertThat(engine.get(receipt).block(WAIT).status()).isEqualTo(InstanceStatus.RUNNABLE);
        browser.get(url("/instances?status=runnable&type=charge-card"));
        assertThat(browser.findElements(By.cssSelector("#instances tbody tr[data-id]"))).isEmpty();
    }

    /**
     * The activity chart is the database's: after the engine and the dashboard are replaced (a deploy), the new
     * ones draw the same totals, and another range draws them too.
     */
    @Test
    void theActivityChartIsTheSameAfterARestart(TestDatabase db) {
        BROKEN.add("c-bad");
        // The class's other tests ran on the same database (their engines added their counts as they closed).
        long[] before = totals(null);
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            ids.add(engine.insert(JobRequest.of("charge-card", new Order(i < 2 ? "c-bad" : "c-" + i, i))).block(WAIT));
        }
        for (long id : ids) {
            engine.awaitSettled(id, WAIT).block(WAIT);
        }
        WebDriver browser = browser();
        FluentWait<WebDriver> wait = waiting(browser);
        browser.get(url("/"));
        // Live: the counts arrive with the engine's next flush, without a reload. Each bad card fails three times.
        String completed = Long.toString(before[0] + 10);
        String failed = Long.toString(before[1] + 2);
        wait.until(ExpectedConditions.textToBe(By.id("chart-failed"), failed));
        wait.until(ExpectedConditions.textToBe(By.id("chart-completed"), completed));
        assertThat(browser.findElement(By.id("chart-retried")).getText()).isEqualTo(Long.toString(before[2] + 4));

        server.disposeNow(WAIT);
        dashboard.close();
        engine.close();
        engine = DurableEngine.builder(db.engineOptions().name("browser-it-2").heartbeatInterval(Duration.ofMillis(500))
                .queue(QueueOptions.builder("payments").pollInterval(Duration.ofMillis(100)).build())
                .queue(QueueOptions.builder("mail").pollInterval(Duration.ofMillis(100)).build()).build()).build();
        engine.start().block(WAIT);
        serve("");
        browser.get(url("/"));
        assertThat(browser.findElement(By.id("chart-completed")).getText()).isEqualTo(completed);
        assertThat(browser.findElement(By.id("chart-failed")).getText()).isEqualTo(failed);
        browser.findElement(By.linkText("last 24 hours")).click();
        wait.until(ExpectedConditions.urlContains("range=24h"));
        assertThat(browser.findElement(By.id("chart")).getDomAttribute("data-live")).isEqualTo("0");
        assertThat(browser.findElement(By.id("chart-completed")).getText()).isEqualTo(completed);
        new Select(browser.findElement(By.id("chart-queue"))).selectByValue("mail");
        browser.findElement(By.cssSelector("form.chart-queue button")).click();
        wait.until(ExpectedConditions.urlContains("queue=mail"));
        assertThat(browser.findElement(By.id("chart-completed")).getText()).isEqualTo(Long.toString(totals("mail")[0]));
    }

    /** Completed, failed and retried runs of the last hour as the admin reads them; of one queue, or (null) all. */
    private long[] totals(String queue) {
        long[] totals = new long[3];
        for (QueueActivity minute : engine.admin().activity(Duration.ofHours(1), Duration.ofMinutes(1), queue)
                .block(WAIT)) {
            totals[0] += minute.completed();
            totals[1] += minute.failed();
            totals[2] += minute.retried();
        }
        return totals;
    }

    private static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static void screenshot(WebDriver browser, Path file) throws IOException {
        Files.createDirectories(file.getParent());
        Files.copy(((TakesScreenshot) browser).getScreenshotAs(OutputType.FILE).toPath(), file,
                StandardCopyOption.REPLACE_EXISTING);
        assertThat(Files.size(file)).isPositive();
    }

    private ChromeOptions options() {
        ChromeOptions options = new ChromeOptions();
        options.setBinary(CHROMIUM.toFile());
        // As root in a sandbox without a network: no sandbox, no GPU, nothing that phones home.
        options.addArguments("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--hide-scrollbars", "--window-size=1400,1000",
                "--user-data-dir=" + profile.toAbsolutePath());
        return options;
    }

    private static void requireChromium() {
        boolean present = Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER);
        if (!present && "true".equalsIgnoreCase(System.getenv("CI"))) {
            fail("CI=true but " + CHROMIUM + " or " + CHROMEDRIVER + " is missing: .ci/install-chromium installs them");
        }
        Assumptions.assumeTrue(present, "Chromium is not installed (apt-get install chromium chromium-driver)");
    }
}
