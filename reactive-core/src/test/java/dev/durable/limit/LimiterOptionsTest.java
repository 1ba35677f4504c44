package dev.durable.limit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.EngineOptions;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

class LimiterOptionsTest {

    private static EngineOptions.Builder options() {
        return EngineOptions.builder().url("r2dbc:postgresql://localhost/db");
    }

    @Test
    void theDefaultLimiterIsPostgresAndANullOneIsRefusedByName() {
        assertThat(options().build().limiter()).hasToString("postgres");
        assertThatThrownBy(() -> options().limiter(null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("limiter");
    }

    @Test
    void aChosenLimiterSurvivesMutate() {
        LimiterFactory custom = context -> Mono.empty();
        EngineOptions built = options().limiter(custom).build();
        assertThat(built.limiter()).isSameAs(custom);
        assertThat(built.mutate().build().limiter()).isSameAs(custom);
    }

    @Test
    void claimsAreValidated() {
        assertThatThrownBy(() -> new LimitClaim(1, "", new GateSlot("g", "k", 0), null, null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("holder");
        assertThatThrownBy(() -> new GateSlot("g", null, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("key");
        assertThatThrownBy(() -> new LimitClaim(1, "h", null, new RateSlot("r", null, 0), null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weight of rate slot r");
        assertThatThrownBy(() -> new LimitClaim(1, "h", null, null, new WindowSlot("w", null, 0)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weight of window slot w");
        LimitClaim gated = new LimitClaim(1, "h", new GateSlot("g", "k", 0), new RateSlot("r", null, 2), null);
        assertThat(gated.holdsSlot()).isTrue();
        assertThat(gated.withoutGate().holdsSlot()).isFalse();
        assertThat(gated.withoutGate().rate().name()).isEqualTo("r");
        // A limiter keys the shared bucket, or window partition, as "".
        assertThat(gated.rate().partitionKey()).isEmpty();
        assertThat(new WindowSlot("w", "p", 1).partitionKey()).isEqualTo("p");
    }

    @Test
    void thePostgresLimiterAdmitsInThePickAndLeavesCreditToTheTrigger() {
        Limiter limiter = PostgresLimiter.factory().create(new LimiterContext("o",
                io.r2dbc.spi.ConnectionFactories.get("r2dbc:postgresql://user@localhost/db"), "durable",
                java.util.Map.of(), java.util.Map.of(), java.util.Map.of(), java.time.Duration.ofSeconds(30),
                EngineOptions.DEFAULT_CALL_TIMEOUT)).block();
        assertThat(limiter.admitsInPick()).isTrue();
        LimitClaim claim = new LimitClaim(7, "h", new GateSlot("g", "k", 0), null, null);
        assertThat(limiter.admit(List.of(claim)).block()).isEqualTo(Set.of(7L));
        assertThat(limiter.renew(List.of(claim)).block()).isZero();
        limiter.credit(List.of(claim)).block();
    }
}
