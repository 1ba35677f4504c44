package dev.durable.example;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.support.ui.ExpectedConditions;
import org.openqa.selenium.support.ui.FluentWait;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The example's dashboard (the {@code durable-dashboard} module, mounted by the starter at {@code /durable})
 * in headless Chromium (Debian's {@code chromium} and {@code chromium-driver}): a job inserted through the
 * API shows up COMPLETED in the live feed; a failed job is found with the search, its error read on its
 * page and retried in place with its button; a screenshot goes to {@code target/screenshots/dashboard.png}.
 *
 * <p>Without Chromium the test is skipped, unless {@code CI=true}: CI installs it
 * ({@code .ci/install-chromium}), so there a missing browser is a failure, not a skip.
 */
class DashboardBrowserIT {

    /** Debian's paths; overridable with -Dchromium.binary and -Dchromium.driver. */
    private static final Path CHROMIUM = Path.of(System.getProperty("chromium.binary", "/usr/bin/chromium"));
    private static final Path CHROMEDRIVER = Path.of(System.getProperty("chromium.driver", "/usr/bin/chromedriver"));
    private static final Duration WAIT = Duration.ofSeconds(30);

    @TempDir
    Path profile;

    @Test
    void seesAJobDoneLiveAndRetriesAFailedOneInPlace() throws IOException {
        requireChromium();
        try (RunningExample app = RunningExample.start("durable.schema=example_browser_it")) {
            ChromeDriverService service = new ChromeDriverService.Builder()
                    .usingDriverExecutable(CHROMEDRIVER.toFile()).usingAnyFreePort().build();
            WebDriver browser = new ChromeDriver(service, options());
            try {
                FluentWait<WebDriver> wait = new WebDriverWait(browser, WAIT)
                        .ignoring(StaleElementReferenceException.class);
                browser.get(app.baseUrl() + "/");
                assertThat(browser.getCurrentUrl()).endsWith("/durable/");
                // The feed is connected before anything is inserted, so no event can be missed.
                wait.until(ExpectedConditions.textToBe(By.id("connection"), "live"));

                long done = insert(app, "greet", "browser");
                wait.until(ExpectedConditions.presenceOfElementLocated(
                        By.cssSelector("#feed li[data-id='" + done + "'][data-kind='COMPLETED']")));
                wait.until(driver -> Long.parseLong(driver.findElement(
                        By.cssSelector("#queues tr[data-queue='default'] td[data-status='done']")).getText()) >= 1);

                long failed = insert(app, "flaky", "from the browser");
                wait.until(ExpectedConditions.presenceOfElementLocated(
                        By.cssSelector("#feed li[data-id='" + failed + "'][data-kind='FAILED']")));
                browser.get(app.baseUrl() + "/durable/instances");
                browser.findElement(By.cssSelector("input[name='status'][value='failed']")).click();
                browser.findElement(By.id("f-type")).sendKeys("flaky");
                browser.findElement(By.id("search")).click();
                wait.until(ExpectedConditions.elementToBeClickable(
                        By.cssSelector("#instances tr[data-id='" + failed + "'] td.num a"))).click();
                String error = wait.until(driver -> driver.findElement(By.id("last-error"))).getText();
                assertThat(error).contains("flaky: from the browser");

                browser.findElement(By.cssSelector("#actions button.retry")).click();
                wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("notice"), "Retried in place"));
                // The same instance runs again (and, being flaky, fails again).
                assertThat(browser.getCurrentUrl()).contains("/durable/instances/" + failed);

                Path screenshot = Path.of("target", "screenshots", "dashboard.png");
                Files.createDirectories(screenshot.getParent());
                Files.copy(((TakesScreenshot) browser).getScreenshotAs(OutputType.FILE).toPath(), screenshot,
                        StandardCopyOption.REPLACE_EXISTING);
                assertThat(Files.size(screenshot)).isPositive();
            } finally {
                browser.quit();
                service.stop();
            }
        }
    }

    private static long insert(RunningExample app, String type, String args) {
        Map<?, ?> inserted = app.client().post().uri("/api/jobs")
                .bodyValue(Map.of("type", type, "args", args)).exchange().expectStatus().isCreated()
                .expectBody(Map.class).returnResult().getResponseBody();
        return ((Number) inserted.get("id")).longValue();
    }

    private ChromeOptions options() {
        ChromeOptions options = new ChromeOptions();
        options.setBinary(CHROMIUM.toFile());
        // As root in a sandbox without a network: no sandbox, no GPU, nothing that phones home.
        options.addArguments("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1280,1100", "--user-data-dir=" + profile.toAbsolutePath());
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
