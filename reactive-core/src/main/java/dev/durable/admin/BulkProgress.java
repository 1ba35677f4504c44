package dev.durable.admin;

import dev.durable.InstanceStatus;

/**
 * Where a bulk job ({@link DurableAdmin#startBulk}) stands, as its last committed chunk left it: its
 * instance id and status, whether it is still counting the instances its filter matches ({@code counting};
 * {@code total} is the count so far), then how many of them it has gone through ({@code done}) and acted
 * on ({@code affected}: the others had moved on or the action did not apply). A crash loses at most the
 * chunk in progress, which the job's next attempt does again.
 */
public record BulkProgress(long id, BulkAction action, InstanceStatus status, boolean counting, long total,
        long done, long affected) {

    /** Done over total, from 0 to 1: 1 once the job is done (or matched nothing), 0 while counting. */
    public double fraction() {
        if (status == InstanceStatus.DONE) {
            return 1.0;
        }
        if (counting) {
            return 0.0;
        }
        return total == 0 ? 1.0 : Math.min(1.0, (double) done / total);
    }

    /** Whether the job has settled (done, failed or cancelled). */
    public boolean finished() {
        return status.isTerminal();
    }
}
