package dev.durable.sync;

import dev.durable.sync.SyncConfigException.Rule;
import dev.durable.sync.internal.PairGraph;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * Who syncs with whom: a list of undirected {@link NodePair}s over an ordered node set. A node's
 * partners are the other ends of the pairs it is in, without repeats, in pair order. There is no
 * default topology: the choice decides how fast a change spreads and how much each tick costs.
 *
 * <ul>
 *   <li>{@link #fullMesh()}: every unordered pair {@code (i, j)}, {@code i < j} in node order;
 *   <li>{@link #ring()}: each node with its successor, the last wrapping to the first;
 *   <li>{@link #ringWithNeighbours(int)}: each node with its next {@code k} successors;
 *   <li>{@link #randomGossip(int, long)}: each node with {@code k} others drawn afresh each round,
 *       reproducibly from a seed;
 *   <li>{@link #custom}: an explicit, validated pair list.
 * </ul>
 *
 * Every method checks the node set first ({@link Rule#BLANK_NODE}, {@link Rule#DUPLICATE_NODE}) and
 * answers a broken one with {@link SyncConfigException}.
 */
public sealed interface SyncTopology
        permits SyncTopology.FullMesh, SyncTopology.Ring, SyncTopology.RandomGossip, SyncTopology.Custom {

    /** Every node with every other: one round to converge, {@code N(N-1)/2} pairs. */
    static SyncTopology fullMesh() {
        return new FullMesh();
    }

    /** Each node with its successor, the last with the first: {@code N} pairs, {@code N-1} rounds. */
    static SyncTopology ring() {
        return new Ring(1);
    }

    /**
     * Each node with its next {@code k} successors (so {@code k} neighbours on each side): about
     * {@code kN} pairs, converging in {@code ceil((N-1)/k)} rounds; {@code k = 1} is {@link #ring()}.
     */
    static SyncTopology ringWithNeighbours(int k) {
        return new Ring(k);
    }

    /**
     * Each node draws {@code k} others at random each round; the same seed, node order and round
     * give the same pairs on every node. Cheap for large clusters; converges with high probability
     * in about {@code log N} rounds, but with no fixed bound.
     */
    static SyncTopology randomGossip(int k, long seed) {
        return new RandomGossip(k, seed);
    }

    /** Exactly these pairs; checked here for self pairs and, against a node set, for unknown ends. */
    static SyncTopology custom(Collection<NodePair> pairs) {
        if (pairs == null) {
            throw new SyncConfigException(Rule.INVALID_OPTION, "custom pairs must not be null");
        }
        return new Custom(List.copyOf(pairs));
    }

    /** Exactly these pairs. */
    static SyncTopology custom(NodePair... pairs) {
        return custom(Arrays.asList(pairs));
    }

    /** The pairs over {@code nodes} in round {@code round} (only random gossip depends on the round). */
    List<NodePair> pairs(List<String> nodes, long round);

    /** The pairs over {@code nodes} (round 0). */
    default List<NodePair> pairs(List<String> nodes) {
        return pairs(nodes, 0);
    }

    /** The partners of {@code local}, which must be one of {@code nodes} (round 0). */
    default List<String> partners(String local, List<String> nodes) {
        return partners(local, nodes, 0);
    }

    /**
     * The other ends of the pairs {@code local} is in, without repeats, in pair order; a
     * {@link Rule#LOCAL_NODE_NOT_IN_SET} error when {@code local} is not one of {@code nodes}.
     */
    default List<String> partners(String local, List<String> nodes, long round) {
        List<NodePair> pairs = pairs(nodes, round);
        PairGraph.checkLocal(local, nodes);
        return PairGraph.partners(local, pairs);
    }

    /** Checks {@code nodes} against this topology, throwing {@link SyncConfigException}. */
    default void validate(List<String> nodes) {
        pairs(nodes, 0);
    }

    /** Whether a change on any node eventually reaches every other node over the pairs. */
    default boolean isConnected(List<String> nodes) {
        return PairGraph.isConnected(nodes, pairs(nodes, 0));
    }

    /**
     * A fixed bound on the rounds after which every node has seen a change made anywhere, where
     * the topology has one: full mesh 1 (0 for a single node), ring {@code N-1}; empty for custom
     * pairs and random gossip.
     */
    OptionalInt roundsToConverge(List<String> nodes);

    /** Every unordered pair of distinct nodes. */
    record FullMesh() implements SyncTopology {

        @Override
        public List<NodePair> pairs(List<String> nodes, long round) {
            List<String> checked = PairGraph.checkNodes(nodes);
            PairGraph.Builder pairs = new PairGraph.Builder(checked);
            for (int i = 0; i < checked.size(); i++) {
                for (int j = i + 1; j < checked.size(); j++) {
                    pairs.add(i, j);
                }
            }
            return pairs.build();
        }

        @Override
        public OptionalInt roundsToConverge(List<String> nodes) {
            return OptionalInt.of(PairGraph.checkNodes(nodes).size() < 2 ? 0 : 1);
        }
    }

    /**
     * Each node with its next {@code neighbours} successors, wrapping round; repeats (a ring of
     * two, or more neighbours than half the ring) are dropped, so a small ring is a full mesh.
     */
    record Ring(int neighbours) implements SyncTopology {

        public Ring {
            if (neighbours < 1) {
                throw new SyncConfigException(Rule.NON_POSITIVE_FANOUT,
                        "a ring's neighbours must be at least 1, was " + neighbours);
            }
        }

        @Override
        public List<NodePair> pairs(List<String> nodes, long round) {
            List<String> checked = PairGraph.checkNodes(nodes);
            int n = checked.size();
            PairGraph.Builder pairs = new PairGraph.Builder(checked);
            if (n < 2) {
                return pairs.build();
            }
            int reach = Math.min(neighbours, n - 1);
            for (int i = 0; i < n; i++) {
                for (int d = 1; d <= reach; d++) {
                    pairs.add(i, (i + d) % n);
                }
            }
            return pairs.build();
        }

        @Override
        public OptionalInt roundsToConverge(List<String> nodes) {
            int n = PairGraph.checkNodes(nodes).size();
            // The reference's ring bound is N-1 (a change walking one way round); k neighbours walk
            // k nodes a round. Both are bounds: the true diameter is about half of it.
            return OptionalInt.of(n < 2 ? 0 : (n - 1 + neighbours - 1) / neighbours);
        }
    }

    /**
     * Each node paired with {@code sample} others drawn without repeats each round, from a random
     * generator seeded by the seed, the round and the node's index: reproducible on every node that
     * has the same node order. A node's partners are those it drew and those that drew it.
     */
    record RandomGossip(int sample, long seed) implements SyncTopology {

        public RandomGossip {
            if (sample < 1) {
                throw new SyncConfigException(Rule.NON_POSITIVE_FANOUT,
                        "random gossip's sample size must be at least 1, was " + sample);
            }
        }

        @Override
        public List<NodePair> pairs(List<String> nodes, long round) {
            List<String> checked = PairGraph.checkNodes(nodes);
            int n = checked.size();
            PairGraph.Builder pairs = new PairGraph.Builder(checked);
            int draws = Math.min(sample, n - 1);
            int[] others = new int[Math.max(0, n - 1)];
            for (int i = 0; i < n; i++) {
                SplittableRandom random = new SplittableRandom(mix(mix(seed ^ mix(round)) + i));
                for (int j = 0, o = 0; j < n; j++) {
                    if (j != i) {
                        others[o++] = j;
                    }
                }
                // A partial Fisher-Yates shuffle: the first `draws` slots are a uniform sample.
                for (int d = 0; d < draws; d++) {
                    int pick = d + random.nextInt(others.length - d);
                    int chosen = others[pick];
                    others[pick] = others[d];
                    others[d] = chosen;
                    pairs.add(i, chosen);
                }
            }
            return pairs.build();
        }

        /** True: each round draws afresh, so over rounds every pair is drawn (with k of at least 1). */
        @Override
        public boolean isConnected(List<String> nodes) {
            PairGraph.checkNodes(nodes);
            return true;
        }

        @Override
        public OptionalInt roundsToConverge(List<String> nodes) {
            PairGraph.checkNodes(nodes);
            return OptionalInt.empty();
        }

        /** SplitMix64's finaliser: spreads consecutive rounds and indices over the seed space. */
        private static long mix(long z) {
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }
    }

    /** Exactly the given pairs, none of a node with itself; repeats are kept out of partners. */
    record Custom(List<NodePair> pairs) implements SyncTopology {

        public Custom {
            if (pairs == null) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "custom pairs must not be null");
            }
            pairs = List.copyOf(pairs);
            for (NodePair pair : pairs) {
                if (pair.a().equals(pair.b())) {
                    throw new SyncConfigException(Rule.SELF_PAIR,
                            "pair " + pair + " joins node '" + pair.a() + "' with itself");
                }
            }
        }

        @Override
        public List<NodePair> pairs(List<String> nodes, long round) {
            List<String> checked = PairGraph.checkNodes(nodes);
            PairGraph.checkEndpoints(pairs, checked);
            return pairs;
        }

        /**
         * The pairs whose ends are both in {@code members}: under changing membership a pair to a
         * node that left is idle, not an error.
         */
        public Custom restrictTo(Collection<String> members) {
            Set<String> present = new HashSet<>(members);
            return new Custom(pairs.stream()
                    .filter(pair -> present.contains(pair.a()) && present.contains(pair.b()))
                    .toList());
        }

        @Override
        public OptionalInt roundsToConverge(List<String> nodes) {
            pairs(nodes, 0);
            return OptionalInt.empty();
        }
    }
}
