package dev.durable.sync;

import dev.durable.DurableException;

/**
 * A sync scheduler configuration, topology or node set that breaks a rule. {@link #rule()} says
 * which, so a caller can act on it (for example wait for membership to include this node) without
 * parsing the message; the message names the offending value.
 */
public class SyncConfigException extends DurableException {

    private static final long serialVersionUID = 1L;

    /** The rules a configuration or node set can break. */
    public enum Rule {
        /** The shard count is below 1. */
        ZERO_SHARDS,
        /** The interval is zero or negative. */
        NON_POSITIVE_INTERVAL,
        /** A node appears twice in the node set. */
        DUPLICATE_NODE,
        /** A node id is null or blank. */
        BLANK_NODE,
        /** A custom pair names a node that is not in the node set. */
        UNKNOWN_ENDPOINT,
        /** A custom pair joins a node with itself. */
        SELF_PAIR,
        /** The local node is not in the node set (or not yet in the membership). */
        LOCAL_NODE_NOT_IN_SET,
        /** No topology was chosen: there is deliberately no default. */
        NO_TOPOLOGY,
        /** Neither a static node set nor a membership source was given, or both were. */
        NO_NODE_SET,
        /** A topology's neighbour or sample count is below 1. */
        NON_POSITIVE_FANOUT,
        /** Any other option out of its range (concurrency, jitter, timeouts, nulls). */
        INVALID_OPTION
    }

    private final Rule rule;

    public SyncConfigException(Rule rule, String message) {
        super(message);
        this.rule = rule;
    }

    /** The rule that was broken. */
    public Rule rule() {
        return rule;
    }
}
