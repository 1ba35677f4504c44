package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.limit.RateSlot;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Outcome is a value: every option makes a new one, and a contradiction is refused when it is made. */
class OutcomeTest {

    @Test
    void everyFieldIsFinal() {
        for (Field field : Outcome.class.getDeclaredFields()) {
            if (!field.isSynthetic()) {
                assertThat(Modifier.isFinal(field.getModifiers())).as(field.getName()).isTrue();
            }
        }
    }

    @Test
    void optionsReturnNewOutcomesAndLeaveTheOriginalAlone() {
        Outcome<String> next = Outcome.next("b", "state");
        Outcome<String> keyed = next.concurrencyKey("k");
        Outcome<String> limited = keyed.rateLimit("smtp", 2, "tenant-1");
        Outcome<String> later = limited.after(Duration.ofSeconds(5));

        assertThat(next.keyChange()).isEqualTo(Outcome.KeyChange.KEEP);
        assertThat(next.rateChange()).isEqualTo(Outcome.RateChange.KEEP);
        assertThat(keyed.concurrencyKey()).isEqualTo("k");
        assertThat(keyed.rateLimit()).isNull();
        assertThat(limited.concurrencyKey()).isEqualTo("k");
        assertThat(limited.rateLimit()).isEqualTo(new RateSlot("smtp", "tenant-1", 2));
        assertThat(limited.delay()).isNull();
        assertThat(later.delay()).isEqualTo(Duration.ofSeconds(5));
        assertThat(later.rateLimit().name()).isEqualTo("smtp");
        assertThat(later.step()).isEqualTo("b");
        assertThat(later.state()).isEqualTo("state");
    }

    @Test
    void aGateReplacesAKeyAndAKeyReplacesAGate() {
        Outcome<String> gated = Outcome.next("b", "s").gate("partner", "acme");
        assertThat(gated.keyChange()).isEqualTo(Outcome.KeyChange.GATE);
        assertThat(gated.gate()).isEqualTo("partner");
        assertThat(gated.concurrencyKey()).isEqualTo("acme");
        Outcome<String> keyed = gated.concurrencyKey("own");
        assertThat(keyed.gate()).isNull();
        assertThat(keyed.keyChange()).isEqualTo(Outcome.KeyChange.SET);
        assertThat(gated.releaseConcurrencyKey().gate()).isNull();
        Outcome<String> cleared = Outcome.next("b", "s").rateLimit("smtp", 1, null).noRateLimit();
        assertThat(cleared.rateChange()).isEqualTo(Outcome.RateChange.CLEAR);
        assertThat(cleared.rateLimit()).isNull();
    }

    @Test
    void contradictionsAreRefusedInEitherOrder() {
        assertThatThrownBy(() -> Outcome.next("b", "s").inline().after(Duration.ofSeconds(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cannot be inline and run after");
        assertThatThrownBy(() -> Outcome.next("b", "s").after(Duration.ofSeconds(1)).inline())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cannot be inline and run after");
        assertThatThrownBy(() -> Outcome.next("b", "s").inline().gate("g", "k"))
                .hasMessageContaining("cannot be inline");
        assertThatThrownBy(() -> Outcome.next("b", "s").gate("g", "k").inline())
                .hasMessageContaining("cannot be inline");
        assertThatThrownBy(() -> Outcome.next("b", "s").rateLimit("r", 1, null).inline())
                .hasMessageContaining("cannot be inline");
        assertThat(Outcome.next("b", "s").rateLimit("r", 1, null).noRateLimit().inline().isInline()).isTrue();
        assertThat(Outcome.next("b", "s").inline().concurrencyKey("k").isInline()).isTrue();
        assertThatThrownBy(() -> Outcome.next("b", "s").inline().fairnessKey("tenant"))
                .hasMessageContaining("cannot be inline");
        assertThatThrownBy(() -> Outcome.next("b", "s").defaultFairnessKey().inline())
                .hasMessageContaining("cannot be inline");
    }

    @Test
    void aFairnessKeyIsSetOrClearedAndCheckedAsAKey() {
        Outcome<String> moved = Outcome.next("b", "s").fairnessKey("tenant-b");
        assertThat(moved.fairnessChange()).isEqualTo(Outcome.FairnessChange.SET);
        assertThat(moved.fairnessKey()).isEqualTo("tenant-b");
        Outcome<String> cleared = moved.defaultFairnessKey();
        assertThat(cleared.fairnessChange()).isEqualTo(Outcome.FairnessChange.CLEAR);
        assertThat(cleared.fairnessKey()).isNull();
        assertThat(Outcome.next("b", "s").fairnessChange()).isEqualTo(Outcome.FairnessChange.KEEP);
        assertThatThrownBy(() -> Outcome.next("b", "s").fairnessKey("")).hasMessageContaining("fairnessKey must not be blank");
        assertThatThrownBy(() -> Outcome.next("b", "s").fairnessKey("x".repeat(JobRequest.MAX_KEY_BYTES + 1)))
                .hasMessageContaining("fairnessKey must be at most");
        assertThatThrownBy(() -> Outcome.retry(Duration.ofSeconds(1)).fairnessKey("t"))
                .hasMessage("fairnessKey applies to NEXT outcomes, not RETRY");
    }

    @Test
    void optionsOfNextRefuseOtherKindsAndBadArguments() {
        assertThatThrownBy(() -> Outcome.done("r").inline())
                .hasMessage("inline applies to NEXT outcomes, not DONE");
        assertThatThrownBy(() -> Outcome.retry(Duration.ofSeconds(1)).after(Duration.ofSeconds(1)))
                .hasMessage("after applies to NEXT outcomes, not RETRY");
        assertThatThrownBy(() -> Outcome.next("b", "s").after(Duration.ofSeconds(-1)))
                .hasMessageContaining("after must not be negative");
        assertThatThrownBy(() -> Outcome.next(" ", "s")).hasMessageContaining("step must not be blank");
        assertThatThrownBy(() -> Outcome.await(Set.of(), "b", "s")).hasMessageContaining("at least one signal");
        assertThatThrownBy(() -> Outcome.await(Set.of("a,b"), "b", "s")).hasMessageContaining("contain ','");
        assertThatThrownBy(() -> Outcome.await(Set.of("a"), "b", "s", Duration.ZERO))
                .hasMessageContaining("timeout must be positive");
        assertThatThrownBy(() -> Outcome.fail(" ")).hasMessageContaining("error must not be blank");
        assertThatThrownBy(() -> Outcome.next("b", "s").rateLimit("r", 0, null)).hasMessageContaining("weight");
    }

    @Test
    void awaitAndSpawnCopyWhatTheyAreGiven() {
        Outcome<String> await = Outcome.await(Set.of("paid", "cancelled"), "ship", "s", Duration.ofHours(1));
        assertThat(await.signals()).containsExactlyInAnyOrder("paid", "cancelled");
        assertThat(await.timeout()).isEqualTo(Duration.ofHours(1));
        java.util.List<JobRequest> children = new java.util.ArrayList<>(List.of(JobRequest.of("c", 1)));
        Outcome<String> spawn = Outcome.spawnChildren(children, "join", "s");
        children.clear();
        assertThat(spawn.children()).hasSize(1);
    }
}
