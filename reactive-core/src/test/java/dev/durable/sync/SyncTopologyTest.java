package dev.durable.sync;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.sync.SyncConfigException.Rule;
import java.util.HashSet;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;
import java.util.stream.IntStream;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;

class SyncTopologyTest {

    private static final List<String> FOUR = List.of("0", "1", "2", "3");

    private static List<String> nodes(int n) {
        return IntStream.range(0, n).mapToObj(Integer::toString).toList();
    }

    @Test
    void fullMeshOfFourHasSixPairsInNodeOrder() {
        assertThat(SyncTopology.fullMesh().pairs(FOUR)).containsExactly(
                NodePair.of("0", "1"), NodePair.of("0", "2"), NodePair.of("0", "3"),
                NodePair.of("1", "2"), NodePair.of("1", "3"), NodePair.of("2", "3"));
        assertThat(SyncTopology.fullMesh().partners("2", FOUR)).containsExactly("0", "1", "3");
    }

    @Test
    void ringOfFourPairsEachNodeWithItsSuccessor() {
        SyncTopology ring = SyncTopology.ring();
        assertThat(ring.pairs(FOUR)).containsExactly(
                NodePair.of("0", "1"), NodePair.of("1", "2"), NodePair.of("2", "3"), NodePair.of("3", "0"));
        assertThat(ring.partners("0", FOUR)).containsExactly("1", "3");
        assertThat(ring.partners("1", FOUR)).containsExactly("0", "2");
    }

    @Test
    void ringOfFewerThanTwoNodesHasNoPairs() {
        assertThat(SyncTopology.ring().pairs(List.of())).isEmpty();
        assertThat(SyncTopology.ring().pairs(List.of("solo"))).isEmpty();
        assertThat(SyncTopology.ring().partners("solo", List.of("solo"))).isEmpty();
        assertThat(SyncTopology.fullMesh().pairs(List.of("solo"))).isEmpty();
    }

    @Test
    void ringOfTwoHasOnePairNotARepeat() {
        assertThat(SyncTopology.ring().pairs(List.of("a", "b"))).containsExactly(NodePair.of("a", "b"));
        assertThat(SyncTopology.ring().partners("b", List.of("a", "b"))).containsExactly("a");
    }

    @Test
    void ringWithNeighboursPairsEachNodeWithItsNextK() {
        SyncTopology ring2 = SyncTopology.ringWithNeighbours(2);
        List<String> six = nodes(6);
        assertThat(ring2.pairs(six)).hasSize(12);
        assertThat(ring2.partners("0", six)).containsExactly("1", "2", "4", "5");
        assertThat(SyncTopology.ringWithNeighbours(1).pairs(FOUR)).isEqualTo(SyncTopology.ring().pairs(FOUR));
        // Wider than the ring: every other node, each pair once, which is the full mesh's set.
        List<NodePair> wide = SyncTopology.ringWithNeighbours(3).pairs(FOUR);
        assertThat(wide).hasSize(6);
        assertThat(SyncTopology.ringWithNeighbours(3).partners("1", FOUR)).containsExactlyInAnyOrder("0", "2", "3");
    }

    @Test
    void customPartnersAreTheOtherEndsWithoutRepeatsInPairOrder() {
        SyncTopology custom = SyncTopology.custom(
                NodePair.of("c", "a"), NodePair.of("a", "b"), NodePair.of("b", "a"), NodePair.of("b", "c"));
        List<String> abc = List.of("a", "b", "c");
        assertThat(custom.partners("a", abc)).containsExactly("c", "b");
        assertThat(custom.partners("b", abc)).containsExactly("a", "c");
        assertThat(custom.pairs(abc)).hasSize(4);
    }

    @Test
    void convergenceProperties() {
        assertThat(SyncTopology.fullMesh().roundsToConverge(FOUR)).isEqualTo(OptionalInt.of(1));
        assertThat(SyncTopology.fullMesh().roundsToConverge(List.of("solo"))).isEqualTo(OptionalInt.of(0));
        assertThat(SyncTopology.ring().roundsToConverge(FOUR)).isEqualTo(OptionalInt.of(3));
        assertThat(SyncTopology.ring().roundsToConverge(nodes(10))).isEqualTo(OptionalInt.of(9));
        assertThat(SyncTopology.ring().roundsToConverge(List.of("solo"))).isEqualTo(OptionalInt.of(0));
        assertThat(SyncTopology.ringWithNeighbours(3).roundsToConverge(nodes(10))).isEqualTo(OptionalInt.of(3));
        assertThat(SyncTopology.custom(NodePair.of("0", "1")).roundsToConverge(FOUR)).isEmpty();
        assertThat(SyncTopology.randomGossip(2, 7).roundsToConverge(FOUR)).isEmpty();

        assertThat(SyncTopology.fullMesh().isConnected(FOUR)).isTrue();
        assertThat(SyncTopology.ring().isConnected(FOUR)).isTrue();
        assertThat(SyncTopology.custom(NodePair.of("0", "1"), NodePair.of("2", "3")).isConnected(FOUR)).isFalse();
        assertThat(SyncTopology.custom(NodePair.of("0", "1"), NodePair.of("1", "2"), NodePair.of("3", "2"))
                .isConnected(FOUR)).isTrue();
        assertThat(SyncTopology.randomGossip(1, 7).isConnected(nodes(50))).isTrue();
    }

    @Test
    void randomGossipIsReproducibleFromTheSeedAndFreshEachRound() {
        List<String> twenty = nodes(20);
        SyncTopology gossip = SyncTopology.randomGossip(3, 42);
        assertThat(SyncTopology.randomGossip(3, 42).pairs(twenty, 5)).isEqualTo(gossip.pairs(twenty, 5));
        Set<List<String>> samples = new HashSet<>();
        for (int round = 0; round < 10; round++) {
            List<String> partners = gossip.partners("7", twenty, round);
            // Its own 3 draws, plus the nodes that drew it; never itself, never twice.
            assertThat(partners).hasSizeGreaterThanOrEqualTo(3).doesNotContain("7").doesNotHaveDuplicates();
            samples.add(partners);
        }
        assertThat(samples).hasSizeGreaterThan(1);
        assertThat(SyncTopology.randomGossip(3, 43).pairs(twenty, 5)).isNotEqualTo(gossip.pairs(twenty, 5));
        // Fewer nodes than the sample: everyone else.
        assertThat(SyncTopology.randomGossip(5, 1).partners("0", FOUR, 3)).containsExactlyInAnyOrder("1", "2", "3");
        assertThat(SyncTopology.randomGossip(5, 1).pairs(List.of("solo"), 3)).isEmpty();
    }

    @Test
    void duplicateNodeIsRejected() {
        assertRule(() -> SyncTopology.ring().pairs(List.of("a", "b", "a")), Rule.DUPLICATE_NODE, "'a'");
    }

    @Test
    void blankNodeIsRejected() {
        assertRule(() -> SyncTopology.fullMesh().pairs(List.of("a", " ")), Rule.BLANK_NODE, "position 1");
    }

    @Test
    void pairEndpointOutsideTheSetIsRejected() {
        assertRule(() -> SyncTopology.custom(NodePair.of("a", "z")).pairs(List.of("a", "b")),
                Rule.UNKNOWN_ENDPOINT, "'z'");
    }

    @Test
    void pairOfANodeWithItselfIsRejected() {
        assertRule(() -> SyncTopology.custom(NodePair.of("a", "a")), Rule.SELF_PAIR, "'a'");
    }

    @Test
    void localNodeOutsideTheSetIsRejected() {
        assertRule(() -> SyncTopology.ring().partners("x", FOUR), Rule.LOCAL_NODE_NOT_IN_SET, "'x'");
    }

    @Test
    void fanoutBelowOneIsRejected() {
        assertRule(() -> SyncTopology.ringWithNeighbours(0), Rule.NON_POSITIVE_FANOUT, "was 0");
        assertRule(() -> SyncTopology.randomGossip(-1, 3), Rule.NON_POSITIVE_FANOUT, "was -1");
    }

    @Test
    void customRestrictedToMembersDropsPairsToAbsentNodes() {
        SyncTopology.Custom custom = (SyncTopology.Custom) SyncTopology.custom(
                NodePair.of("a", "b"), NodePair.of("a", "c"));
        assertThat(custom.restrictTo(List.of("a", "b")).partners("a", List.of("a", "b"))).containsExactly("b");
    }

    static void assertRule(ThrowingCallable call, Rule rule, String messagePart) {
        assertThatThrownBy(call).isInstanceOfSatisfying(SyncConfigException.class,
                error -> assertThat(error.rule()).isEqualTo(rule)).hasMessageContaining(messagePart);
    }
}
