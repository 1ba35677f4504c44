package dev.durable.sync;

import dev.durable.DurableException;

/** One pull that failed: which partner, which shard, and the trigger's error as the cause. */
public class SyncPullException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final String partner;
    private final int shard;

    public SyncPullException(String partner, int shard, Throwable cause) {
        super("sync pull from partner '" + partner + "' for shard " + shard + " failed: " + cause, cause);
        this.partner = partner;
        this.shard = shard;
    }

    public String partner() {
        return partner;
    }

    public int shard() {
        return shard;
    }
}
