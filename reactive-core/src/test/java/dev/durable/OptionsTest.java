package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class OptionsTest {

    @Test
    void queueOptionsNameTheBrokenOptionAndRule() {
        assertThatThrownBy(() -> QueueOptions.builder(" "))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("queue name");
        assertThatThrownBy(() -> QueueOptions.builder("q").concurrency(0))
                .hasMessage("concurrency must be at least 1, was 0");
        assertThatThrownBy(() -> QueueOptions.builder("q").prefetch(-1))
                .hasMessage("prefetch must be at least 0, was -1");
        assertThatThrownBy(() -> QueueOptions.builder("q").minDemand(0))
                .hasMessage("minDemand must be at least 1, was 0");
        assertThatThrownBy(() -> QueueOptions.builder("q").pollInterval(Duration.ZERO))
                .hasMessage("pollInterval must be positive, was PT0S");
        assertThatThrownBy(() -> QueueOptions.builder("q").drainTimeout(Duration.ofSeconds(-1)))
                .hasMessageContaining("drainTimeout must not be negative");
        assertThatThrownBy(() -> QueueOptions.builder("q").pollInterval(Duration.ofSeconds(5))
                .maxPollInterval(Duration.ofSeconds(1)).build())
                .hasMessageContaining("maxPollInterval must be at least pollInterval");
    }

    @Test
    void minDemandIsClampedToTheClaimCeiling() {
        QueueOptions queue = QueueOptions.builder("q").concurrency(4).prefetch(2).minDemand(50).build();
        assertThat(queue.minDemand()).isEqualTo(6);
        assertThat(queue.claimCeiling()).isEqualTo(6);
        assertThat(queue.mutate().prefetch(10).minDemand(8).build().minDemand()).isEqualTo(8);
    }

    @Test
    void engineOptionsCheckEachSetterAndTheRulesAcross() {
        assertThatThrownBy(() -> EngineOptions.builder().schema("Bad-Schema"))
                .hasMessageContaining("schema must be a lower-case SQL identifier");
        assertThatThrownBy(() -> EngineOptions.builder().schema("x\"; drop table y; --"))
                .hasMessageContaining("schema must be a lower-case SQL identifier");
        assertThatThrownBy(() -> EngineOptions.builder().url("postgresql://h/db"))
                .hasMessageContaining("url must be an R2DBC URL");
        assertThatThrownBy(() -> EngineOptions.builder().poolMaxSize(1))
                .hasMessage("poolMaxSize must be at least 2, was 1");
        assertThatThrownBy(() -> EngineOptions.builder().name("two words"))
                .hasMessageContaining("name must not contain blanks");
        assertThatThrownBy(() -> EngineOptions.builder().build())
                .hasMessage("one of connectionFactory and url must be set");
        assertThatThrownBy(() -> EngineOptions.builder().url("r2dbc:postgresql://h/db")
                .leaseTtl(Duration.ofSeconds(10)).heartbeatInterval(Duration.ofSeconds(5)).build())
                .hasMessageContaining("leaseTtl must be more than twice heartbeatInterval");
        assertThatThrownBy(() -> EngineOptions.builder().queue("a").queue("a"))
                .hasMessage("queue 'a' is configured twice");
    }

    @Test
    void passwordsNeverReachToString() {
        EngineOptions options = EngineOptions.builder()
                .url("r2dbc:postgresql://app:s3cret@db:5432/app?sslmode=disable&password=other").build();
        assertThat(options.toString()).doesNotContain("s3cret").doesNotContain("other").contains("app:****@db");
        assertThatThrownBy(() -> EngineOptions.builder().url("postgresql://app:s3cret@db/app"))
                .message().doesNotContain("s3cret");
        // An unencoded '@' or '/' in the password: the user info ends at the last '@'.
        for (String url : List.of("r2dbc:postgresql://someone:pA55@wOrD@db:5432/app",
                "r2dbc:postgresql://someone:pA55/wOrD@db:5432/app",
                "r2dbc:pool:postgresql://:pA55:w/O@wOrD@[::1]/app")) {
            assertThat(EngineOptions.builder().url(url).build().toString())
                    .doesNotContain("pA55").doesNotContain("wOrD").contains(":****@");
            assertThatThrownBy(() -> EngineOptions.builder().url(url.substring("r2dbc:".length())))
                    .message().doesNotContain("pA55").doesNotContain("wOrD");
        }
    }

    @Test
    void anUnusableUrlIsRefusedWithoutItsSecrets() {
        for (String url : List.of("r2dbc:nosuchdriver://app:pA55wOrD@db/app?sslPassword=pA55wOrD",
                "r2dbc:postgresql:app:pA55wOrD@db", "r2dbc:postgresql://app:pA55%zzwOrD@db/app",
                "r2dbc:postgresql://app:pA55@wOrD@db/app?connectTimeout=soon")) {
            EngineOptions options = EngineOptions.builder().url(url).build();
            assertThat(options.toString()).doesNotContain("pA55").doesNotContain("wOrD");
            Throwable error = catchThrowable(() -> DurableEngine.builder(options).build());
            assertThat(error).as(url).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageStartingWith("url is not a usable R2DBC URL").hasNoCause();
            assertThat(error.getMessage()).as(url).doesNotContain("pA55").doesNotContain("wOrD");
        }
    }

    @Test
    void backoffDoublesFromItsBaseUpToItsCap() {
        Backoff backoff = Backoff.DEFAULT;
        assertThat(backoff.delay(1)).isEqualTo(Duration.ofSeconds(1));
        assertThat(backoff.delay(2)).isEqualTo(Duration.ofSeconds(2));
        assertThat(backoff.delay(9)).isEqualTo(Duration.ofSeconds(256));
        assertThat(backoff.delay(10)).isEqualTo(Duration.ofMinutes(5));
        assertThat(backoff.delay(1000)).isEqualTo(Duration.ofMinutes(5));
        assertThatThrownBy(() -> Backoff.exponential(Duration.ofSeconds(2), Duration.ofSeconds(1)))
                .hasMessageContaining("cap must be at least base");
    }

    @Test
    void jobDefinitionsCheckTheirArguments() {
        JobDefinition<String, String> job = JobDefinition.of("t", String.class, (String s) -> reactor.core.publisher.Mono.just(s));
        assertThat(job.queue()).isEqualTo(JobDefinition.DEFAULT_QUEUE);
        assertThat(job.maxAttempts()).isEqualTo(20);
        assertThatThrownBy(() -> job.maxAttempts(0)).hasMessage("maxAttempts must be at least 1, was 0");
        assertThatThrownBy(() -> job.timeout(Duration.ZERO)).hasMessage("timeout must be positive, was PT0S");
        assertThatThrownBy(() -> DurableEngine.builder(EngineOptions.builder().url("r2dbc:postgresql://h/d").build())
                .register(job).register(job))
                .hasMessage("type 't' is registered twice");
    }
}
