package dev.durable.example;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.support.ui.ExpectedConditions;
import org.openqa.selenium.support.ui.FluentWait;
import org.openqa.selenium.support.ui.Select;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The dashboard in headless Chromium (Debian's {@code chromium} and {@code chromium-driver}):
 * inserts a job through the page's form, sees it reach COMPLETED in the live feed and done in the
 * instances table, retries a failed job with its button, and saves a screenshot to
 * {@code target/screenshots/dashboard.png}.
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
    void insertsAJobThroughThePageAndSeesItDoneInTheLiveFeed() throws IOException {
        requireChromium();
        try (RunningExample app = RunningExample.start("durable.schema=example_browser_it")) {
            ChromeDriverService service = new ChromeDriverService.Builder()
                    .usingDriverExecutable(CHROMEDRIVER.toFile()).usingAnyFreePort().build();
            WebDriver browser = new ChromeDriver(service, options());
            try {
                // The page re-renders its tables on every burst of events: an element found a moment
                // ago may be gone, so every step is a wait that retries on a stale element.
                FluentWait<WebDriver> wait = new WebDriverWait(browser, WAIT)
                        .ignoring(StaleElementReferenceException.class);
                browser.get(app.baseUrl() + "/");
                // The feed is connected before anything is inserted, so no event can be missed.
                wait.until(ExpectedConditions.textToBe(By.id("connection"), "live"));

                long done = insertThroughForm(browser, wait, "greet", "\"browser\"");
                wait.until(ExpectedConditions.presenceOfElementLocated(
                        By.cssSelector("#feed li[data-id='" + done + "'][data-kind='COMPLETED']")));
                wait.until(ExpectedConditions.presenceOfElementLocated(
                        By.cssSelector("#instances tr[data-id='" + done + "'][data-status='done']")));
                wait.until(driver -> Long.parseLong(driver.findElement(
                        By.cssSelector("#queues tr[data-queue='default'] td[data-status='done']")).getText()) >= 1);

                long failed = insertThroughForm(browser, wait, "flaky", "\"from the browser\"");
                String failedRow = "#instances tr[data-id='" + failed + "'][data-status='failed']";
                String error = wait.until(driver -> driver.findElement(By.cssSelector(failedRow + " td.error")).getText());
                assertThat(error).contains("flaky: from the browser");
                wait.until(driver -> {
                    driver.findElement(By.cssSelector(failedRow + " button.retry")).click();
                    return true;
                });
                // The retry is a new instance of the same type, newer than the failed one.
                wait.until(driver -> driver.findElements(By.cssSelector("#instances tbody tr")).stream()
                        .anyMatch(row -> Long.parseLong(row.getDomAttribute("data-id")) > failed
                                && row.getText().contains("flaky")));

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

    private static long insertThroughForm(WebDriver browser, FluentWait<WebDriver> wait, String type, String args) {
        new Select(browser.findElement(By.id("type"))).selectByValue(type);
        WebElement input = browser.findElement(By.id("args"));
        input.clear();
        input.sendKeys(args);
        String before = browser.findElement(By.id("insert-result")).getDomAttribute("data-id");
        browser.findElement(By.id("insert-button")).click();
        String id = wait.until(driver -> {
            String now = driver.findElement(By.id("insert-result")).getDomAttribute("data-id");
            return now != null && !now.equals(before) ? now : null;
        });
        return Long.parseLong(id);
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
