package dev.durable.admin;

import java.time.Instant;

/**
 * What one queue's runs did in one stretch of time, counted by every engine of the fleet as its
 * outcomes committed ({@link DurableAdmin#activity}): the same whichever engine reads it, and kept
 * across restarts. An engine adds its counts every few seconds, so the current stretch is still
 * filling, and an engine killed outright takes its last few seconds' counts with it. Not counted:
 * outcomes committed on a caller's own transaction ({@code DurableEngine.complete(connection, ...)}:
 * the engine never sees that commit), and instances failed in bulk by
 * {@code DurableAdmin.failUnmigratable} and {@code DurableEngine.failUnrunnable} (removals of a type
 * or version, not runs). Bulk actions run as jobs of their own queue, {@code durable.admin}, and
 * count there.
 *
 * @param from the start of the stretch (a whole minute of the database's clock)
 * @param queue the queue
 * @param completed runs that ended done
 * @param failed runs (and lease recoveries out of attempts) that failed for good
 * @param retried attempts that failed and run again after their backoff
 * @param cancelled instances cancelled, running or not
 * @param reaped claims taken back because their lease ran out (their worker died or froze)
 */
public record QueueActivity(Instant from, String queue, long completed, long failed, long retried, long cancelled,
        long reaped) {
}
