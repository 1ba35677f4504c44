package dev.durable.sync;

/**
 * An undirected pair of nodes that sync with each other: each pulls from the other. The order of
 * {@code a} and {@code b} only matters for the order in which partners are listed.
 */
public record NodePair(String a, String b) {

    public NodePair {
        if (a == null || a.isBlank()) {
            throw new SyncConfigException(SyncConfigException.Rule.BLANK_NODE,
                    "a node pair's first node must not be blank, was " + quote(a));
        }
        if (b == null || b.isBlank()) {
            throw new SyncConfigException(SyncConfigException.Rule.BLANK_NODE,
                    "a node pair's second node must not be blank, was " + quote(b));
        }
    }

    public static NodePair of(String a, String b) {
        return new NodePair(a, b);
    }

    /** True when {@code node} is one of the two ends. */
    public boolean contains(String node) {
        return a.equals(node) || b.equals(node);
    }

    /** True when both pairs join the same two nodes, in either order. */
    public boolean sameNodesAs(NodePair other) {
        return (a.equals(other.a) && b.equals(other.b)) || (a.equals(other.b) && b.equals(other.a));
    }

    private static String quote(String value) {
        return value == null ? "null" : "'" + value + "'";
    }

    @Override
    public String toString() {
        return "(" + a + ", " + b + ")";
    }
}
