package dev.durable.internal;

import dev.durable.limit.GateSlot;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.EngineOptions;
import dev.durable.Fairness;
import dev.durable.InvalidRequestException;
import dev.durable.Outcome;
import dev.durable.Outcome.FairnessChange;
import dev.durable.Outcome.KeyChange;
import dev.durable.QueueOptions;
import dev.durable.internal.sql.OutcomeRow.LimitChange;
import dev.durable.internal.sql.Rows.ClaimedRow;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * The fairness key a transition moves its row to, and the cap gate that follows it: the rule of an
 * insert (the cap gate for a row with no gate or concurrency key of its own), applied to the row as
 * the transition leaves it.
 */
class FairnessChangeTest {

    private final RequestMapper mapper = new RequestMapper(Map.of(), EngineOptions.builder()
            .url("r2dbc:postgresql://h/db")
            .queue(QueueOptions.builder("capped").fairness(Fairness.builder().maxExecutingPerKey(2).build()).build())
            .queue(QueueOptions.builder("fair").fairness(Fairness.equalShares()).build())
            .queue(QueueOptions.builder("plain").build())
            .build());

    @Test
    void aKeptKeyChangesNothing() {
        LimitChange change = LimitChange.NONE;
        assertThat(mapper.withFairness(row("capped", null, null), FairnessChange.KEEP, null, change)).isSameAs(change);
    }

    @Test
    void aRowWithoutAKeyOfItsOwnOrWithTheCapGateTakesTheNewKeysCap() {
        String cap = Fairness.capGate("capped");
        for (ClaimedRow row : List.of(row("capped", null, null), row("capped", cap, "tenant-a"))) {
            LimitChange moved = mapper.withFairness(row, FairnessChange.SET, "tenant-b", LimitChange.NONE);
            assertThat(moved.fairnessChange()).isEqualTo(FairnessChange.SET);
            assertThat(moved.fairnessKey()).isEqualTo("tenant-b");
            assertThat(moved.keyChange()).isEqualTo(KeyChange.GATE);
            assertThat(moved.gate()).isEqualTo(cap);
            assertThat(moved.concurrencyKey()).isEqualTo("tenant-b");
            assertThat(moved.gateShards()).isEqualTo(1);
        }
        // Released from its own key in the same transition, the row is one without a key: capped.
        LimitChange released = new LimitChange(KeyChange.RELEASE, null, null, 0, Outcome.RateChange.KEEP, null,
                Outcome.WindowChange.KEEP, null);
        assertThat(mapper.withFairness(row("capped", null, "own"), FairnessChange.SET, "tenant-b", released).gate())
                .isEqualTo(cap);
    }

    @Test
    void aRowWithAGateOrKeyOfItsOwnKeepsIt() {
        LimitChange kept = mapper.withFairness(row("capped", null, "own"), FairnessChange.SET, "tenant-b",
                LimitChange.NONE);
        assertThat(kept.keyChange()).isEqualTo(KeyChange.KEEP);
        assertThat(kept.fairnessKey()).isEqualTo("tenant-b");
        assertThat(mapper.withFairness(row("capped", "partner", "acme"), FairnessChange.SET, "tenant-b",
                LimitChange.NONE).keyChange()).isEqualTo(KeyChange.KEEP);
        LimitChange ownKey = new LimitChange(KeyChange.SET, "mine", null, 0, Outcome.RateChange.KEEP, null,
                Outcome.WindowChange.KEEP, null);
        LimitChange set = mapper.withFairness(row("capped", null, null), FairnessChange.SET, "tenant-b", ownKey);
        assertThat(set.keyChange()).isEqualTo(KeyChange.SET);
        assertThat(set.concurrencyKey()).isEqualTo("mine");
    }

    @Test
    void aClearedKeyIsTheQueuesDefault() {
        assertThat(mapper.withFairness(row("fair", null, null), FairnessChange.CLEAR, null, LimitChange.NONE)
                .fairnessKey()).isEqualTo("");
        LimitChange capped = mapper.withFairness(row("capped", null, null), FairnessChange.CLEAR, null,
                LimitChange.NONE);
        assertThat(capped.fairnessKey()).isEqualTo("");
        assertThat(capped.concurrencyKey()).isEqualTo("");
        // A queue without fairness: no key (its pick reads none), and no cap gate.
        LimitChange plain = mapper.withFairness(row("plain", null, null), FairnessChange.CLEAR, null, LimitChange.NONE);
        assertThat(plain.fairnessChange()).isEqualTo(FairnessChange.CLEAR);
        assertThat(plain.fairnessKey()).isNull();
        assertThat(plain.keyChange()).isEqualTo(KeyChange.KEEP);
    }

    @Test
    void aNewKeyIsCheckedAsAnInsertsIs() {
        assertThatThrownBy(() -> mapper.withFairness(row("fair", null, null), FairnessChange.SET, "nul\u0000",
                LimitChange.NONE)).isInstanceOf(InvalidRequestException.class).hasMessageContaining("fairnessKey");
    }

    private static ClaimedRow row(String queue, @Nullable String gate, @Nullable String key) {
        return new ClaimedRow(1, "w", "flow", 1, queue, 0, 0, "a", null, 1, 5, key, null, List.of(), List.of(),
                List.of(), gate == null ? null : new GateSlot(gate, key, 0), null);
    }
}
