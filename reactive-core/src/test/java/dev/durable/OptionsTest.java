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
        assertThatThrownBy(() -> EngineOptions.builder().maxBatchBytes(8))
                .hasMessage("maxBatchBytes must be at least 16, was 8");
        assertThatThrownBy(() -> EngineOptions.builder().url("r2dbc:postgresql://h/db").maxPayloadBytes(4096)
                .maxBatchBytes(4095).build())
                .hasMessageContaining("maxBatchBytes must be at least maxPayloadBytes");
    }

    @Test
    void everyOptionAppearsInToStringAndSurvivesMutate() throws Exception {
        EngineOptions options = EngineOptions.builder().url("r2dbc:postgresql://h/db").poolMaxSize(7).schema("s1")
                .name("n1").queue("q1").leaseTtl(Duration.ofSeconds(40)).heartbeatInterval(Duration.ofSeconds(4))
                .reaperInterval(Duration.ofSeconds(3)).runMaintenance(false).pokeWindow(Duration.ofMillis(7))
                .commitBatchSize(99).commitParallelism(3).pickRetries(5).maxPayloadBytes(4096)
                .rejectUnknownTypes(false).applyMigrations(false).recurringInterval(Duration.ofSeconds(9))
                .eventBufferSize(77).gate("g1", 3).rateLimit("r1", 2.5, 4).retention(Duration.ofDays(2))
                .reconcileInterval(Duration.ofMinutes(9))
                .runObservationConvention(new dev.durable.observation.DefaultRunObservationConvention())
                .build();
        String printed = options.toString();
        for (java.lang.reflect.Method getter : EngineOptions.class.getDeclaredMethods()) {
            if (java.lang.reflect.Modifier.isPublic(getter.getModifiers())
                    && !java.lang.reflect.Modifier.isStatic(getter.getModifiers()) && getter.getParameterCount() == 0
                    && !List.of("toString", "hashCode", "mutate").contains(getter.getName())
                    && getter.invoke(options) != null) {
                assertThat(printed).as("toString names " + getter.getName()).contains(getter.getName() + "=");
            }
        }
        EngineOptions copy = options.mutate().build();
        assertThat(copy.toString()).isEqualTo(printed);
        assertThat(copy.queues()).containsOnlyKeys("q1");
        assertThat(copy.gates()).containsOnlyKeys("g1");
        assertThat(options.mutate().queue("q2").build().queues()).containsOnlyKeys("q1", "q2");
        assertThat(options.queues()).containsOnlyKeys("q1");
    }

    @Test
    void theEnginesOwnPoolMustServeEveryQueueTheCommitsAndMaintenance() {
        EngineOptions.Builder builder = EngineOptions.builder().url("r2dbc:postgresql://h/db").poolMaxSize(4)
                .commitParallelism(2).queue("a").queue("b");
        assertThatThrownBy(builder::build).hasMessage("poolMaxSize must be at least the number of queues plus"
                + " commitParallelism plus one (5 for 2 queues and commitParallelism 2), was 4");
        assertThat(builder.poolMaxSize(5).build().poolMaxSize()).isEqualTo(5);
        // A caller's own connection factory is the caller's to size.
        assertThat(EngineOptions.builder().connectionFactory(io.r2dbc.spi.ConnectionFactories.get("r2dbc:postgresql://user@h/db"))
                .poolMaxSize(2).queue("a").queue("b").build().queues()).hasSize(2);
    }

    @Test
    void oneNameCannotBeBothARateLimitAndAWindow() {
        EngineOptions.Builder builder = EngineOptions.builder().url("r2dbc:postgresql://h/db")
                .rateLimit("api", 5, 10).window("api", 100, Duration.ofHours(1));
        assertThatThrownBy(builder::build).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'api' is configured both as rate limit")
                .hasMessageContaining("and as window")
                .hasMessageContaining("a limit name must name one of them");
        assertThat(EngineOptions.builder().url("r2dbc:postgresql://h/db").rateLimit("api", 5, 10)
                .window("api-hourly", 100, Duration.ofHours(1)).build().windows()).containsOnlyKeys("api-hourly");
    }

    @Test
    void permitTryConcurrencyIsAtLeastOne() {
        assertThat(EngineOptions.builder().url("r2dbc:postgresql://h/db").build().permitTryConcurrency())
                .isEqualTo(EngineOptions.DEFAULT_PERMIT_TRY_CONCURRENCY);
        assertThatThrownBy(() -> EngineOptions.builder().permitTryConcurrency(0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("permitTryConcurrency");
    }

    @Test
    void anUnencodedAtSignInThePasswordIsRefusedWithoutQuotingIt() {
        assertThatThrownBy(() -> EngineOptions.builder().url("r2dbc:postgresql://app:p@ssw0rd@db:5432/app"))
                .hasMessageContaining("must percent-encode '@'")
                .message().doesNotContain("ssw0rd");
        assertThat(EngineOptions.builder().url("r2dbc:postgresql://app:p%40ssw0rd@db:5432/app").build().url())
                .contains("%40");
    }

    @Test
    void passwordsNeverReachToString() {
        EngineOptions options = EngineOptions.builder()
                .url("r2dbc:postgresql://app:s3cret@db:5432/app?sslmode=disable&password=other").build();
        assertThat(options.toString()).doesNotContain("s3cret").doesNotContain("other").contains("app:****@db");
        assertThatThrownBy(() -> EngineOptions.builder().url("postgresql://app:s3cret@db/app"))
                .message().doesNotContain("s3cret");
        // An unencoded '/' in the password: the user info ends at the last '@'.
        String slashed = "r2dbc:postgresql://someone:pA55/wOrD@db:5432/app";
        for (String url : List.of(slashed, "r2dbc:pool:postgresql://:pA55:w/O@wOrD@[::1]/app")) {
            assertThat(EngineOptions.builder().url(url).build().toString())
                    .doesNotContain("pA55").doesNotContain("wOrD").contains(":****@");
        }
        // An unencoded '@' is refused (R2DBC would read the rest as the host), without quoting it.
        for (String url : List.of(slashed, "r2dbc:postgresql://someone:pA55@wOrD@db:5432/app")) {
            assertThatThrownBy(() -> EngineOptions.builder().url(url.substring("r2dbc:".length())))
                    .message().doesNotContain("pA55").doesNotContain("wOrD");
            if (!url.equals(slashed)) {
                assertThatThrownBy(() -> EngineOptions.builder().url(url))
                        .message().contains("percent-encode").doesNotContain("pA55").doesNotContain("wOrD");
            }
        }
    }

    @Test
    void anUnusableUrlIsRefusedWithoutItsSecrets() {
        for (String url : List.of("r2dbc:nosuchdriver://app:pA55wOrD@db/app?sslPassword=pA55wOrD",
                "r2dbc:postgresql:app:pA55wOrD@db", "r2dbc:postgresql://app:pA55%zzwOrD@db/app",
                "r2dbc:postgresql://app:pA55%40wOrD@db/app?connectTimeout=soon")) {
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
