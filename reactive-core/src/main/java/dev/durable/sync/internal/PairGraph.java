package dev.durable.sync.internal;

import dev.durable.sync.NodePair;
import dev.durable.sync.SyncConfigException;
import dev.durable.sync.SyncConfigException.Rule;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The node-set checks and pair-graph arithmetic the topologies share. */
public final class PairGraph {

    private PairGraph() {
    }

    /** Checks a node set: no null or blank id, no node twice. Returns an unmodifiable copy. */
    public static List<String> checkNodes(Collection<String> nodes) {
        if (nodes == null) {
            throw new SyncConfigException(Rule.NO_NODE_SET, "the node set must not be null");
        }
        Map<String, Integer> seen = new HashMap<>();
        int index = 0;
        for (String node : nodes) {
            if (node == null || node.isBlank()) {
                throw new SyncConfigException(Rule.BLANK_NODE, "node ids must not be blank, was "
                        + (node == null ? "null" : "'" + node + "'") + " at position " + index);
            }
            Integer first = seen.putIfAbsent(node, index);
            if (first != null) {
                throw new SyncConfigException(Rule.DUPLICATE_NODE, "node '" + node
                        + "' appears twice in the node set, at positions " + first + " and " + index);
            }
            index++;
        }
        return List.copyOf(nodes);
    }

    /** Checks that {@code local} is one of {@code nodes}. */
    public static void checkLocal(String local, List<String> nodes) {
        if (local == null || !nodes.contains(local)) {
            throw new SyncConfigException(Rule.LOCAL_NODE_NOT_IN_SET, "local node "
                    + (local == null ? "null" : "'" + local + "'") + " is not in the node set " + nodes);
        }
    }

    /** Checks that both ends of every pair are in {@code nodes}. */
    public static void checkEndpoints(List<NodePair> pairs, List<String> nodes) {
        Set<String> members = new HashSet<>(nodes);
        for (NodePair pair : pairs) {
            for (String end : List.of(pair.a(), pair.b())) {
                if (!members.contains(end)) {
                    throw new SyncConfigException(Rule.UNKNOWN_ENDPOINT, "pair " + pair + " names node '"
                            + end + "', which is not in the node set " + nodes);
                }
            }
        }
    }

    /** The other ends of the pairs {@code local} is in, without repeats, in pair order. */
    public static List<String> partners(String local, List<NodePair> pairs) {
        Set<String> partners = new LinkedHashSet<>();
        for (NodePair pair : pairs) {
            if (pair.a().equals(local)) {
                partners.add(pair.b());
            } else if (pair.b().equals(local)) {
                partners.add(pair.a());
            }
        }
        return List.copyOf(partners);
    }

    /** Whether every node can reach every other over the pairs (true for fewer than two nodes). */
    public static boolean isConnected(List<String> nodes, List<NodePair> pairs) {
        if (nodes.size() < 2) {
            return true;
        }
        Map<String, List<String>> adjacent = new HashMap<>();
        for (NodePair pair : pairs) {
            adjacent.computeIfAbsent(pair.a(), key -> new ArrayList<>()).add(pair.b());
            adjacent.computeIfAbsent(pair.b(), key -> new ArrayList<>()).add(pair.a());
        }
        Set<String> reached = new HashSet<>();
        ArrayDeque<String> frontier = new ArrayDeque<>();
        frontier.add(nodes.get(0));
        reached.add(nodes.get(0));
        while (!frontier.isEmpty()) {
            for (String next : adjacent.getOrDefault(frontier.poll(), List.of())) {
                if (reached.add(next)) {
                    frontier.add(next);
                }
            }
        }
        return reached.containsAll(nodes);
    }

    /**
     * Collects pairs by node index, dropping self pairs and pairs already present in either
     * order, so a small ring (two nodes, or k neighbours wrapping round) has no repeats.
     */
    public static final class Builder {

        private final List<String> nodes;
        private final Set<Long> seen = new HashSet<>();
        private final List<NodePair> pairs = new ArrayList<>();

        public Builder(List<String> nodes) {
            this.nodes = nodes;
        }

        public void add(int i, int j) {
            if (i == j) {
                return;
            }
            long key = (long) Math.min(i, j) * nodes.size() + Math.max(i, j);
            if (seen.add(key)) {
                pairs.add(new NodePair(nodes.get(i), nodes.get(j)));
            }
        }

        public List<NodePair> build() {
            return List.copyOf(pairs);
        }
    }
}
